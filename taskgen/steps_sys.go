package taskgen

import (
	"fmt"
	"path"
	"strings"
)

func init() {
	register(&step{name: "sys.chmod", cat: CatSysadmin, consumes: fileKinds, apply: sysChmod})
	register(&step{name: "sys.checksum", cat: CatSysadmin, consumes: fileKinds, apply: sysChecksum})
	register(&step{name: "script.report", cat: CatScripting, consumes: []Kind{Text, CSV}, apply: scriptReport})
	register(&step{name: "debug.fix", cat: CatDebugging, consumes: []Kind{Broken}, apply: debugFix})
}

var modes = []uint32{0o600, 0o640, 0o644, 0o700, 0o750}

func modeWords(m uint32) string {
	const rwx = "rwxrwxrwx"
	b := []byte("---------")
	for i := range 9 {
		if m&(1<<(8-i)) != 0 {
			b[i] = rwx[i]
		}
	}
	return string(b)
}

func sysChmod(g *Gen, in *Artifact) Contribution {
	m := Pick(g, modes)
	out := g.Path("/app/secure", in.Name(), "")
	a := *in
	a.Path = out
	return Contribution{
		Solution: []string{"mkdir -p /app/secure", fmt.Sprintf("cp %s %s", sh(in.Path), sh(out)), fmt.Sprintf("chmod %o %s", m, sh(out))},
		Checks: []Check{{Name: "mode", Paths: []string{out, in.Path}, Body: []string{
			fmt.Sprintf("assert stat.S_IMODE(os.stat(%s).st_mode) == 0o%o", quote(out), m),
			sameAsSource(out, in.Path),
		}}},
		Phrase: fmt.Sprintf("Copy `%s` to `%s` and give the copy the permissions %o (`%s`).",
			in.Path, out, m, modeWords(m)),
		Produces: []*Artifact{&a},
	}
}

func sysChecksum(g *Gen, in *Artifact) Contribution {
	out := g.Path("/app/out", in.Name(), ".sha256")
	return Contribution{
		Solution: []string{"mkdir -p /app/out", fmt.Sprintf("(cd %s && sha256sum %s) > %s", sh(path.Dir(in.Path)), sh(in.Name()), sh(out))},
		Checks: []Check{{Name: "checksum", Paths: []string{out, in.Path}, Body: []string{
			fmt.Sprintf("want = hashlib.sha256(Path(%s).read_bytes()).hexdigest()", quote(in.Path)),
			fmt.Sprintf("assert Path(%s).read_text().split() == [want, %s]", quote(out), quote(in.Name())),
		}}},
		Phrase: fmt.Sprintf("Write the SHA-256 checksum of `%s` to `%s` as one line in `sha256sum` format: the hex digest, two spaces, and the bare file name `%s`.",
			in.Path, out, in.Name()),
		Produces: []*Artifact{{Path: out, Kind: Value}},
	}
}

// scriptReport asks for a script that reads its input at run time; the
// check runs it and also looks for the input's name in it, so printing a
// constant does not pass.
func scriptReport(g *Gen, in *Artifact) Contribution {
	out := g.Path("/app/bin", "report_"+stem(in), ".sh")
	var what, expr, want string
	if in.Kind == CSV {
		what, want = "rows", fmt.Sprintf("rows=%d", len(in.Rows))
		expr = fmt.Sprintf(`echo "rows=$(( $(wc -l < %s) - 1 ))"`, in.Path)
	} else {
		what, want = "lines", fmt.Sprintf("lines=%d", len(in.Lines()))
		expr = fmt.Sprintf(`echo "lines=$(wc -l < %s)"`, in.Path)
	}
	desc := "the number of lines of"
	if in.Kind == CSV {
		desc = "the number of data rows (excluding the header) of"
	}
	return Contribution{
		Solution: []string{"mkdir -p /app/bin", fmt.Sprintf("cat > %s <<'SH'", sh(out)), "#!/bin/bash", expr, "SH", fmt.Sprintf("chmod +x %s", sh(out))},
		Checks: []Check{{Name: "script_output", Paths: []string{out, in.Path}, Body: []string{
			fmt.Sprintf("assert os.access(%s, os.X_OK), %s", quote(out), quote(out+" is not executable")),
			fmt.Sprintf("assert %s in Path(%s).read_text(), %s", quote(in.Name()), quote(out), quote("the script must read "+in.Path)),
			fmt.Sprintf("res = subprocess.run([%s], capture_output=True, text=True, timeout=30)", quote(out)),
			fmt.Sprintf("assert res.returncode == 0 and res.stdout.strip() == %s, res.stdout + res.stderr", quote(want)),
		}}},
		Phrase: fmt.Sprintf("Write an executable bash script `%s` that reads `%s` when it runs and prints %s it as `%s=<n>`.",
			out, in.Path, desc, what),
		Produces: []*Artifact{{Path: out, Kind: Script, Data: []byte("#!/bin/bash\n" + expr + "\n"), Output: want}},
	}
}

func debugFix(g *Gen, in *Artifact) Contribution {
	var fix, keep string
	switch {
	case strings.Contains(string(in.Data), "totl="):
		fix, keep = "sed -i 's/totl=/total=/' "+sh(in.Path), "for n in"
	default:
		fix, keep = "sed -i 's/-lt/-gt/' "+sh(in.Path), "for n in"
	}
	fixed := strings.NewReplacer("totl=", "total=", "-lt", "-gt").Replace(string(in.Data))
	return Contribution{
		Solution: []string{fix},
		Checks: []Check{{Name: "fixed_script", Paths: []string{in.Path}, Body: []string{
			fmt.Sprintf("assert %s in Path(%s).read_text(), %s", quote(keep), quote(in.Path), quote("the loop must stay: fix the defect, do not replace the script")),
			fmt.Sprintf("res = subprocess.run(['bash', %s], capture_output=True, text=True, timeout=30)", quote(in.Path)),
			fmt.Sprintf("assert res.stdout.strip() == %s, res.stdout + res.stderr", quote(in.Output)),
		}}},
		Phrase: fmt.Sprintf("The script `%s` prints a wrong result: it should print `%s` followed by the correct value for the numbers in its loop. Find and fix the defect in place, keeping its loop, so that `bash %s` prints the correct line.",
			in.Path, in.Output[:strings.IndexByte(in.Output, '=')+1], in.Path),
		Produces: []*Artifact{{Path: in.Path, Kind: Script, Data: []byte(fixed), Output: in.Output}},
	}
}
