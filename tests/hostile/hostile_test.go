// Package hostile_test feeds a corpus of hostile inputs through the real
// paths they would take — `t1 tasks import`, the rollout and reward stages
// on a real event log and store, the event log itself — and checks that
// each is refused with a clear error or fails its event, that the good
// inputs next to them are not lost, and that `t1 status` counts the
// failures.
//
// The corpus is testdata/tasks (task directories with one defect each);
// what cannot or should not be committed (huge and special files, crafted
// bundles, garbage verifier output) is generated at test time.
package hostile_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

var t1Bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "t1-hostile-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The long scenarios drive the t1 command; -short runs none of them.
	if !testinfra.Short() {
		if t1Bin, err = testinfra.BuildT1(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := testinfra.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// corpus is the committed task directory name.
func corpus(name string) string {
	return filepath.Join(testinfra.WorkDir(), "testdata", "tasks", name)
}

// copyTask copies the committed good task into a new directory, for the
// defects generated at test time.
func copyTask(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "task")
	src := corpus("good")
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// sparse makes a file of size bytes that takes no disk space.
func sparse(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// Every hostile task directory in one `t1 tasks import` between two good
// ones: each hostile one is refused with a one-line message naming the
// file and the problem, both good ones are imported, and the command
// exits non-zero counting the refusals.
func TestImportRefusesHostileTasks(t *testing.T) {
	testinfra.Long(t)
	cases := []struct {
		name string
		dir  func(t *testing.T) string
		want []string // substrings of the message
	}{
		{"bad-toml", fixed("bad-toml"), []string{"task.toml:3:10", "expected"}},
		{"wrong-types", fixed("wrong-types"), []string{"task.toml", "timeout_sec"}},
		{"missing-instruction", fixed("missing-instruction"), []string{"instruction.md", "missing"}},
		{"missing-verifier", fixed("missing-verifier"), []string{"tests/test.sh", "missing"}},
		{"empty-instruction", fixed("empty-instruction"), []string{"instruction.md", "empty"}},
		{"non-utf8-instruction", fixed("non-utf8-instruction"), []string{"instruction.md", "UTF-8", "line 2"}},
		{"escaping-symlink", fixed("escaping-symlink"), []string{"environment/passwd", "outside the task"}},
		{"linked-instruction", fixed("linked-instruction"), []string{"instruction.md", "link"}},
		{"absolute-symlink", func(t *testing.T) string {
			d := copyTask(t)
			if err := os.Symlink("/etc/shadow", filepath.Join(d, "solution", "shadow")); err != nil {
				t.Fatal(err)
			}
			return d
		}, []string{"solution/shadow", "outside the task"}},
		{"huge-file", func(t *testing.T) string {
			d := copyTask(t)
			sparse(t, filepath.Join(d, "environment", "data.bin"), 40<<20)
			return d
		}, []string{"environment/data.bin", "41943040 bytes"}},
		{"huge-total", func(t *testing.T) string {
			d := copyTask(t)
			for i := range 5 {
				sparse(t, filepath.Join(d, "environment", fmt.Sprintf("part%d.bin", i)), 30<<20)
			}
			return d
		}, []string{"in total"}},
		{"too-many-entries", func(t *testing.T) string {
			d := copyTask(t)
			dir := filepath.Join(d, "environment", "many")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range 10001 {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return d
		}, []string{"more than 10000"}},
		{"non-utf8-file-name", func(t *testing.T) string {
			d := copyTask(t)
			if err := os.WriteFile(filepath.Join(d, "environment-\xff\xfe.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			return d
		}, []string{"UTF-8"}},
		{"fifo", func(t *testing.T) string {
			d := copyTask(t)
			if err := syscall.Mkfifo(filepath.Join(d, "solution", "pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
			return d
		}, []string{"solution/pipe"}},
	}
	dirs := []string{corpus("good")}
	for _, c := range cases {
		dirs = append(dirs, c.dir(t))
	}
	// The second good task is the first one renamed, so its bundle key
	// differs.
	good2 := copyTask(t)
	if err := os.WriteFile(filepath.Join(good2, "instruction.md"), []byte("Write the word hello to /app/out.txt, please.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dirs = append(dirs, good2)

	data := t.TempDir()
	cmd := exec.Command(t1Bin, append([]string{"tasks", "import", "--run", "hostile", "--json", "--data", data}, dirs...)...)
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil {
		t.Fatalf("import of hostile tasks succeeded:\n%s", out)
	}
	if want := fmt.Sprintf("%d of %d tasks not imported", len(cases), len(dirs)); !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
	var results []struct {
		Dir, Task, Bundle, Error string
	}
	if err := json.Unmarshal(out, &results); err != nil || len(results) != len(dirs) {
		t.Fatalf("%d results for %d directories (%v):\n%s", len(results), len(dirs), err, out)
	}
	for _, i := range []int{0, len(dirs) - 1} {
		if r := results[i]; r.Error != "" || r.Bundle == "" {
			t.Errorf("good task %s not imported: %+v", r.Dir, r)
		}
	}
	for i, c := range cases {
		r := results[i+1]
		t.Logf("%s: %s", c.name, r.Error)
		if r.Error == "" || r.Bundle != "" {
			t.Errorf("%s: imported: %+v", c.name, r)
			continue
		}
		if strings.Contains(r.Error, "\n") {
			t.Errorf("%s: message spans lines: %q", c.name, r.Error)
		}
		for _, w := range c.want {
			if !strings.Contains(r.Error, w) {
				t.Errorf("%s: message %q lacks %q", c.name, r.Error, w)
			}
		}
	}
}

func fixed(name string) func(*testing.T) string {
	return func(*testing.T) string { return corpus(name) }
}
