package harbor

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

func TestTaskFS(t *testing.T) {
	task := sample(t, "log-rotate")
	task.Files["tests/files"] = File{Mode: 0o777, Link: "../environment/files"}
	fsys, err := task.FS()
	if err != nil {
		t.Fatal(err)
	}
	if err := fstest.TestFS(fsys, "instruction.md", "task.toml", "tests/test.sh", "environment/files/app.log"); err != nil {
		t.Fatal(err)
	}
	if b, err := fs.ReadFile(fsys, "tests/files/rotate.conf"); err != nil || string(b) != "keep = 3\n" {
		t.Fatalf("through the link: %q %v", b, err)
	}
	if l, err := fs.ReadLink(fsys, "tests/files"); err != nil || l != "../environment/files" {
		t.Fatalf("readlink %q %v", l, err)
	}
	// os.CopyFS gives the same task as Write, links included.
	dir := filepath.Join(t.TempDir(), "copy")
	must(t, os.CopyFS(dir, fsys))
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := task.Hash()
	if h2, _ := back.Hash(); h1 != h2 {
		t.Fatal("CopyFS of FS differs from the task")
	}
}
