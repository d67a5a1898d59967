package trial

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// Tasks validated, imported into a run and exported again come back as
// the same tasks; a directory that holds none is counted, not fatal.
func TestValidateImportExport(t *testing.T) {
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "task.toml"), []byte("not toml ["), 0o644); err != nil {
		t.Fatal(err)
	}
	tasks := filepath.Join(testinfra.WorkDir(), "..", "harbor", "testdata", "tasks")
	checks, err := ValidateAll([]string{tasks, bad})
	if err == nil || err.Error() != "1 of 4 tasks are invalid" {
		t.Fatalf("validate: %v", err)
	}
	var b bytes.Buffer
	WriteValidations(&b, checks)
	if s := b.String(); !strings.HasPrefix(s, "STATUS") || strings.Count(s, "\nok ") != 3 || !strings.Contains(s, "INVALID ") {
		t.Fatalf("validations:\n%s", s)
	}
	ctx := context.Background()
	st := testinfra.FreshStore(t)
	dirs, err := AbsDirs([]string{tasks})
	if err != nil || len(dirs) != 3 || !filepath.IsAbs(dirs[0]) {
		t.Fatalf("dirs %v: %v", dirs, err)
	}
	results, err := ImportAll(ctx, st, "r", dirs)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	WriteImports(&b, results)
	if strings.Count(b.String(), " → runs/r/bundles/") != 3 {
		t.Fatalf("imports:\n%s", b.String())
	}
	out := t.TempDir()
	var wrote []string
	if err := Export(ctx, st, "r", nil, out, func(dir string) { wrote = append(wrote, dir) }); err != nil || len(wrote) != 3 {
		t.Fatalf("export: %v %v", wrote, err)
	}
	if again := Validate(wrote[0]); !again.OK || again.ID != checks[0].ID && again.ID != results[0].Task {
		t.Fatalf("exported task: %+v", again)
	}
	if err := Export(ctx, st, "empty", nil, out, func(string) {}); err == nil || err.Error() != "run empty has no task bundles" {
		t.Fatalf("empty run: %v", err)
	}
}
