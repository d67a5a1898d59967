package harbor

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

var samples = []string{"word-freq", "disk-report", "log-rotate"}

func sample(t *testing.T, name string) *Task {
	t.Helper()
	task, err := Load(filepath.Join("testdata", "tasks", name))
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestLoadSamples(t *testing.T) {
	wf := sample(t, "word-freq")
	c := wf.Config
	if c.SchemaVersion != "1.0" || c.Metadata.Difficulty != "medium" || c.Metadata.Category != "data-processing" ||
		!slices.Equal(c.Metadata.Tags, []string{"text", "shell", "sorting"}) || c.Metadata.ExpertTimeEstimateMin != 10 {
		t.Fatalf("word-freq config %+v", c)
	}
	// memory = "2G" / storage = "10G" are Terminal-Bench 2's size strings.
	if c.Environment.MemoryMB != 2048 || c.Environment.StorageMB != 10240 || c.Environment.CPUs != 1 {
		t.Fatalf("word-freq environment %+v", c.Environment)
	}
	if c.VerifierTimeout().Seconds() != 900 || c.AgentTimeout().Seconds() != 900 || c.BuildTimeout().Seconds() != 600 {
		t.Fatalf("timeouts %v %v %v", c.VerifierTimeout(), c.AgentTimeout(), c.BuildTimeout())
	}
	if wf.EnvironmentKind() != "dockerfile" || wf.WorkDir() != "/app" || wf.Name != "word-freq" {
		t.Fatalf("kind %s workdir %q name %q", wf.EnvironmentKind(), wf.WorkDir(), wf.Name)
	}
	if got := wf.PytestFiles(); !slices.Equal(got, []string{"tests/test_outputs.py"}) || wf.CountTestFunctions() != 5 {
		t.Fatalf("pytest files %v, %d test functions", got, wf.CountTestFunctions())
	}
	if !wf.Files[SolutionPath].Executable() || wf.Files["environment/corpus.txt"].Executable() {
		t.Fatal("execute bits not kept")
	}

	dr := sample(t, "disk-report")
	if dr.EnvironmentKind() != "setup.sh" || dr.Config.Environment.MemoryMB != 1024 || *dr.Config.Environment.AllowInternet {
		t.Fatalf("disk-report %s %+v", dr.EnvironmentKind(), dr.Config.Environment)
	}
	if dr.Config.VerifierTimeout().Seconds() != 120 || len(dr.PytestFiles()) != 0 {
		t.Fatal("disk-report verifier")
	}

	lr := sample(t, "log-rotate")
	if lr.Name != "t1/log-rotate" || lr.Config.SchemaVersion != "1.1" || lr.Config.Verifier.Env["KEEP"] != "3" || lr.Config.Environment.CPUs != 2 {
		t.Fatalf("log-rotate %q %+v", lr.Name, lr.Config)
	}
	if lr.Config.Metadata.Difficulty != "hard" || lr.CountTestFunctions() != 5 {
		t.Fatal("log-rotate metadata")
	}
}

// filesOf maps every file below dir to its bytes and mode.
func filesOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, _ := d.Info()
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = info.Mode().String() + "\n" + string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWriteUnchangedReproducesFiles(t *testing.T) {
	for _, name := range samples {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join("testdata", "tasks", name)
			task := sample(t, name)
			dst := filepath.Join(t.TempDir(), name)
			if err := task.Write(dst); err != nil {
				t.Fatal(err)
			}
			want, got := filesOf(t, src), filesOf(t, dst)
			if len(want) != len(got) {
				t.Fatalf("wrote %d files, want %d", len(got), len(want))
			}
			for p, w := range want {
				if got[p] != w {
					t.Errorf("%s differs after write:\n got %.200q\nwant %.200q", p, got[p], w)
				}
			}
			again, err := Load(dst)
			if err != nil {
				t.Fatal(err)
			}
			h1, _ := task.Hash()
			h2, _ := again.Hash()
			if h1 != h2 {
				t.Fatalf("hash changed over write: %s vs %s", h1, h2)
			}
			if err := task.Write(dst); err == nil {
				t.Fatal("Write into a non-empty directory succeeded")
			}
		})
	}
}

func TestEditKeepsUnknownKeys(t *testing.T) {
	lr := sample(t, "log-rotate")
	lr.Config.Metadata.Difficulty = "medium"
	lr.Config.Environment.MemoryMB = 4096
	lr.Config.Verifier.Env["EXTRA"] = "1"
	if !lr.Config.Changed() {
		t.Fatal("edit not detected")
	}
	out, err := lr.Config.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := toml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("re-emitted task.toml does not parse: %v\n%s", err, out)
	}
	task := doc["task"].(map[string]any)
	authors := task["authors"].([]any)
	env := doc["environment"].(map[string]any)
	if task["name"] != "t1/log-rotate" || authors[0].(map[string]any)["email"] != "maintainers@t1pipe.dev" ||
		doc["solution"] == nil || env["mcp_servers"] == nil || env["storage_mb"] != int64(10240) {
		t.Fatalf("unknown keys lost:\n%s", out)
	}
	if doc["schema_version"] != "1.1" || doc["metadata"].(map[string]any)["difficulty"] != "medium" || env["memory_mb"] != int64(4096) {
		t.Fatalf("edits not written:\n%s", out)
	}
	if !bytes.HasPrefix(out, []byte("schema_version = '1.1'\n")) && !bytes.HasPrefix(out, []byte("schema_version = \"1.1\"\n")) {
		t.Fatalf("version key not first:\n%s", out)
	}
	// Harbor's section order.
	idx := func(s string) int { return bytes.Index(out, []byte(s)) }
	if !(idx("[task]") < idx("[metadata]") && idx("[metadata]") < idx("[verifier]") && idx("[verifier]") < idx("[agent]") && idx("[agent]") < idx("[environment]")) {
		t.Fatalf("sections out of order:\n%s", out)
	}
	re, err := ParseConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if re.Verifier.Env["EXTRA"] != "1" || re.Verifier.Env["KEEP"] != "3" {
		t.Fatalf("verifier env %v", re.Verifier.Env)
	}

	// An edited deprecated size string becomes memory_mb, and the string goes.
	wf := sample(t, "word-freq")
	wf.Config.Environment.MemoryMB = 4096
	out, err = wf.Config.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("memory = ")) || !bytes.Contains(out, []byte("memory_mb = 4096")) || !bytes.Contains(out, []byte("storage = ")) {
		t.Fatalf("size edit:\n%s", out)
	}
	// Undoing the edit gives back the original bytes, comments included.
	dr := sample(t, "disk-report")
	orig := dr.Files
	dr.Config.Agent.TimeoutSec = 1
	dr.Config.Agent.TimeoutSec = 600
	out, _ = dr.Config.Marshal()
	want, _ := os.ReadFile("testdata/tasks/disk-report/task.toml")
	if !bytes.Equal(out, want) || len(orig) != len(dr.Files) {
		t.Fatalf("unedited config not byte-identical:\n%s", out)
	}
}

func TestHashIgnoresNameAndModeBeyondExec(t *testing.T) {
	wf := sample(t, "word-freq")
	h, err := wf.Hash()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "another-name")
	if err := wf.Write(dir); err != nil {
		t.Fatal(err)
	}
	// A checkout with other permission bits (but the same exec bits).
	if err := os.Chmod(filepath.Join(dir, "instruction.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	other, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h2, _ := other.Hash(); h2 != h {
		t.Fatalf("hash depends on name or mode: %s vs %s", h, h2)
	}
	// A symlinked task root loads like the directory itself.
	alias := filepath.Join(t.TempDir(), "alias")
	must(t, os.Symlink(dir, alias))
	if viaLink, err := Load(alias); err != nil {
		t.Fatal(err)
	} else if h2, _ := viaLink.Hash(); h2 != h {
		t.Fatal("a symlinked root loads differently")
	}
	id, _ := other.ID()
	if !strings.HasPrefix(id, "task-") || len(id) != 25 || !strings.HasPrefix(h, id[5:]) {
		t.Fatalf("id %q for hash %s", id, h)
	}
	other.Files["environment/corpus.txt"] = File{Mode: 0o644, Data: []byte("changed\n")}
	if h3, _ := other.Hash(); h3 == h {
		t.Fatal("hash ignores content")
	}
	other.Files["environment/corpus.txt"] = File{Mode: 0o755, Data: wf.Files["environment/corpus.txt"].Data}
	if h4, _ := other.Hash(); h4 == h {
		t.Fatal("hash ignores the exec bit")
	}
}

// TestHostileTaskDirs runs every checked-in hostile task, then the ones
// that cannot be checked in (links, FIFOs, sizes, names), and wants an
// error naming the file (and field).
func TestHostileTaskDirs(t *testing.T) {
	cases := map[string][]string{
		"bad-toml":             {"bad-toml/task.toml:4:", "string"},
		"missing-instruction":  {"missing-instruction/instruction.md", "missing"},
		"missing-task-toml":    {"missing-task-toml/task.toml", "missing"},
		"missing-test-sh":      {"missing-test-sh/tests/test.sh", "missing"},
		"bad-difficulty":       {"task.toml: [metadata] difficulty", `"trivial"`, "easy, medium, hard, unknown"},
		"negative-timeout":     {"task.toml: [verifier] timeout_sec", "negative"},
		"non-utf8-instruction": {"instruction.md", "UTF-8", "line 1"},
		"non-utf8-toml":        {"task.toml:4:", "UTF-8"},
		"bad-memory":           {"[environment] memory", "2 parsecs"},
		"wrong-type":           {"[environment] cpus", "want a number, got a string"},
		"empty-instruction":    {"instruction.md", "empty"},
		"metadata-not-table":   {"[metadata]", "want a table"},
	}
	ents, err := os.ReadDir("testdata/hostile")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(cases) {
		t.Fatalf("%d hostile dirs, %d cases", len(ents), len(cases))
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", "hostile", name))
			wantErr(t, err, want...)
		})
	}

	base := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "task")
		if err := sample(t, "disk-report").Write(dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	programmatic := []struct {
		name  string
		setup func(t *testing.T, dir string)
		lim   Limits
		want  []string
	}{
		{"absolute symlink", func(t *testing.T, dir string) {
			must(t, os.Symlink("/etc/passwd", filepath.Join(dir, "environment", "passwd")))
		}, DefaultLimits, []string{"environment/passwd", "outside the task", "/etc/passwd"}},
		{"relative symlink escape", func(t *testing.T, dir string) {
			must(t, os.Symlink("../../../etc", filepath.Join(dir, "tests", "etc")))
		}, DefaultLimits, []string{"tests/etc", "above the task root"}},
		{"escape through another link", func(t *testing.T, dir string) {
			must(t, os.Symlink(".", filepath.Join(dir, "environment", "here")))
			must(t, os.Symlink("here/../../x", filepath.Join(dir, "environment", "sneaky")))
		}, DefaultLimits, []string{"environment/sneaky", "above the task root"}},
		{"link loop", func(t *testing.T, dir string) {
			must(t, os.Symlink("b", filepath.Join(dir, "environment", "a")))
			must(t, os.Symlink("a", filepath.Join(dir, "environment", "b")))
		}, DefaultLimits, []string{"environment/a", "too many levels"}},
		{"fifo", func(t *testing.T, dir string) {
			must(t, syscall.Mkfifo(filepath.Join(dir, "environment", "pipe"), 0o644))
		}, DefaultLimits, []string{"environment/pipe", "named pipe"}},
		{"huge file", func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, "environment", "big.bin"))
			must(t, err)
			must(t, f.Truncate(DefaultLimits.MaxFileBytes+1)) // sparse: costs no disk
			must(t, f.Close())
		}, DefaultLimits, []string{"environment/big.bin", "over the size limit", "33554433 bytes"}},
		{"total size", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "environment", "a.bin"), make([]byte, 3000), 0o644))
		}, Limits{MaxFileBytes: 4000, MaxTotalBytes: 3500, MaxEntries: 100}, []string{"over the size limit", "in total"}},
		{"entry count", func(t *testing.T, dir string) {}, Limits{MaxFileBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxEntries: 5}, []string{"too many entries", "more than 5"}},
		{"non-UTF-8 name", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "environment", "caf\xe9.txt"), []byte("x"), 0o644))
		}, DefaultLimits, []string{`environment/caf\xe9.txt`, "not valid UTF-8"}},
		{"test.sh is a link", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "tests", "test.sh")))
			must(t, os.Symlink("../solution/solve.sh", filepath.Join(dir, "tests", "test.sh")))
		}, DefaultLimits, []string{"tests/test.sh", "must be a regular file"}},
	}
	for _, c := range programmatic {
		t.Run(c.name, func(t *testing.T) {
			dir := base(t)
			c.setup(t, dir)
			_, err := LoadLimits(dir, c.lim)
			wantErr(t, err, c.want...)
		})
	}
}

func TestInsideLinksAreKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "task")
	must(t, sample(t, "word-freq").Write(dir))
	must(t, os.Symlink("corpus.txt", filepath.Join(dir, "environment", "text")))
	must(t, os.Symlink("../environment", filepath.Join(dir, "tests", "env")))
	task, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if task.Files["environment/text"].Link != "corpus.txt" || task.Files["tests/env"].Link != "../environment" {
		t.Fatalf("links %+v", task.Files)
	}
	out := filepath.Join(t.TempDir(), "out")
	must(t, task.Write(out))
	if l, err := os.Readlink(filepath.Join(out, "tests", "env")); err != nil || l != "../environment" {
		t.Fatalf("written link %q %v", l, err)
	}
}

func TestParseSizeMB(t *testing.T) {
	for in, want := range map[string]int64{"2G": 2048, "512M": 512, "1.5g": 1536, "10 GB": 10240, "2GiB": 2048, "4096K": 4, "1T": 1 << 20, "512 mb": 512} {
		if got, err := ParseSizeMB(in); err != nil || got != want {
			t.Errorf("ParseSizeMB(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "2", "2X", "-1G", "NaNG", "1e300G", "2 parsecs"} {
		if _, err := ParseSizeMB(in); err == nil {
			t.Errorf("ParseSizeMB(%q) accepted", in)
		}
	}
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not mention %q", err, p)
		}
	}
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("error %q is %T, not *harbor.Error", err, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// [[verifier.services]] is read as declared and refused when malformed,
// naming the entry.
func TestConfigServices(t *testing.T) {
	c, err := ParseConfig([]byte("version = \"1.0\"\n[verifier]\ntimeout_sec = 60.0\n[[verifier.services]]\ncommand = \"python3 /app/server.py\"\nport = 8000\n[[verifier.services]]\ncommand = \"service postfix start\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Service{{Command: "python3 /app/server.py", Port: 8000}, {Command: "service postfix start"}}
	if got := c.Services(); !reflect.DeepEqual(got, want) {
		t.Errorf("services %+v, want %+v", got, want)
	}
	for src, msg := range map[string]string{
		"[[verifier.services]]\nport = 80\n":                          "entry 1: command is missing",
		"[[verifier.services]]\ncommand = \"x\"\nport = 70000\n":      "entry 1: port 70000",
		"[[verifier.services]]\ncommand = \"x\"\nport = 0\n":          "entry 1: port 0",
		"[[verifier.services]]\ncommand = \"x\"\nuser = \"nobody\"\n": `unknown key "user"`,
		"[verifier]\nservices = \"x\"\n":                              "want an array of tables",
		"[verifier]\nservices = [\"x\"]\n":                            "want tables of command and port",
	} {
		if _, err := ParseConfig([]byte(src)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: error %v, want one saying %q", src, err, msg)
		}
	}
}
