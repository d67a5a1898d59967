package taskgen

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

func init() {
	register(&step{name: "files.collect", cat: CatFiles, consumes: []Kind{Dir}, apply: filesCollect})
	register(&step{name: "files.archive", cat: CatArchives, consumes: append([]Kind{Dir}, fileKinds...), apply: filesArchive})
	register(&step{name: "files.extract", cat: CatArchives, consumes: []Kind{Archive}, apply: filesExtract})
	register(&step{name: "files.gzip", cat: CatArchives, consumes: []Kind{Text, CSV, JSON, Script, Value}, apply: filesGzip})
}

// reproducibleTar makes GNU tar write the same bytes for the same files
// whenever the reference solution runs: members in name order, with a fixed
// time and owner, so reruns of a seed leave identical sandbox snapshots.
const reproducibleTar = "--sort=name --mtime=@946684800 --owner=0 --group=0 --numeric-owner"

// sameAsSource asserts that copy holds the live bytes of src.
func sameAsSource(copyPath, src string) string {
	return fmt.Sprintf("assert Path(%s).read_bytes() == Path(%s).read_bytes(), %s",
		quote(copyPath), quote(src), quote(copyPath+" differs from "+src))
}

// members lists what an artifact contributes to an archive, named as tar
// names them when run with -C on the artifact's parent directory.
func members(a *Artifact) []File {
	if a.Kind == Dir {
		out := make([]File, len(a.Files))
		for i, f := range a.Files {
			out[i] = File{Path: a.Name() + "/" + f.Path, Data: f.Data, Source: f.Source}
		}
		return out
	}
	return []File{{Path: a.Name(), Data: a.Data, Source: a.Path}}
}

func filesCollect(g *Gen, in *Artifact) Contribution {
	exts := map[string]bool{}
	for _, f := range in.Files {
		exts[path.Ext(f.Path)] = true
	}
	ext := Pick(g, sortedKeys(exts))
	out := g.Path("/app/out", strings.TrimPrefix(ext, ".")+"_files", "")
	var files []File
	var names []string
	for _, f := range in.Files {
		if path.Ext(f.Path) == ext {
			base := path.Base(f.Path)
			files = append(files, File{Path: base, Data: f.Data, Source: f.Source})
			names = append(names, base)
		}
	}
	sortFiles(files)
	slices.Sort(names)
	body := []string{
		fmt.Sprintf("names = sorted(p.name for p in Path(%s).iterdir())", quote(out)),
		fmt.Sprintf("assert names == %s", pyList(names)),
	}
	for _, f := range files {
		body = append(body, sameAsSource(out+"/"+f.Path, f.Source))
	}
	return Contribution{
		Solution: []string{fmt.Sprintf("mkdir -p %s", sh(out)),
			fmt.Sprintf("find %s -type f -name '*%s' -exec cp {} %s/ \\;", sh(in.Path), ext, sh(out))},
		Checks: []Check{{Name: "collected", Paths: []string{out, in.Path}, Body: body}},
		Phrase: fmt.Sprintf("Copy every `*%s` file found anywhere under `%s` into the directory `%s` (flat: file names only, no subdirectories), and nothing else.",
			ext, in.Path, out),
		Produces: []*Artifact{{Path: out, Kind: Dir, Files: files}},
	}
}

func filesArchive(g *Gen, in *Artifact) Contribution {
	out := g.Path("/app/out", stem(in)+"_bundle", ".tar.gz")
	ms := members(in)
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Path
	}
	body := []string{
		fmt.Sprintf("with tarfile.open(%s, 'r:gz') as tf:", quote(out)),
		"    got = {m.name.removeprefix('./'): tf.extractfile(m).read() for m in tf.getmembers() if m.isfile()}",
		fmt.Sprintf("assert sorted(got) == %s", pyList(names)),
	}
	for _, m := range ms {
		body = append(body, fmt.Sprintf("assert got[%s] == Path(%s).read_bytes()", quote(m.Path), quote(m.Source)))
	}
	return Contribution{
		Solution: []string{"mkdir -p /app/out",
			fmt.Sprintf("tar %s -czf %s -C %s %s", reproducibleTar, sh(out), sh(path.Dir(in.Path)), sh(in.Name()))},
		Checks: []Check{{Name: "archive_members", Paths: []string{out, in.Path}, Body: body}},
		Phrase: fmt.Sprintf("Create the gzip-compressed tar archive `%s` holding `%s`, with member names relative to `%s` (so the archive's top-level entry is `%s`).",
			out, in.Path, path.Dir(in.Path), in.Name()),
		Produces: []*Artifact{{Path: out, Kind: Archive, Files: ms}},
	}
}

func filesExtract(g *Gen, in *Artifact) Contribution {
	out := g.Path("/app/restored", strings.TrimSuffix(in.Name(), ".tar.gz"), "")
	var body []string
	var files []File
	for _, m := range in.Files {
		body = append(body, sameAsSource(out+"/"+m.Path, m.Source))
		files = append(files, File{Path: m.Path, Data: m.Data, Source: m.Source})
	}
	return Contribution{
		Solution: []string{fmt.Sprintf("mkdir -p %s", sh(out)), fmt.Sprintf("tar -xzf %s -C %s", sh(in.Path), sh(out))},
		Checks:   []Check{{Name: "extracted", Paths: []string{out}, Body: body}},
		Phrase:   fmt.Sprintf("Extract the archive `%s` into the directory `%s`.", in.Path, out),
		Produces: []*Artifact{{Path: out, Kind: Dir, Files: files}},
	}
}

func filesGzip(g *Gen, in *Artifact) Contribution {
	out := g.Path("/app/out", in.Name(), ".gz")
	return Contribution{
		Solution: []string{"mkdir -p /app/out", fmt.Sprintf("gzip -n -c %s > %s", sh(in.Path), sh(out))},
		Checks: []Check{{Name: "gzip_roundtrip", Paths: []string{out, in.Path}, Body: []string{
			fmt.Sprintf("assert gzip.decompress(Path(%s).read_bytes()) == Path(%s).read_bytes()", quote(out), quote(in.Path)),
		}}},
		Phrase:   fmt.Sprintf("Write a gzip-compressed copy of `%s` to `%s`, keeping the original.", in.Path, out),
		Produces: []*Artifact{{Path: out, Kind: Gzip, Data: nil}},
	}
}
