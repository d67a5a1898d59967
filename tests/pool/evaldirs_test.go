package pool_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/audit"
	"github.com/t1pipe/t1/stages/eval"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trial"
)

// A synthesised task that is a cosmetic edit of a task in one of the
// evaluation suite's Harbor directories is rejected as its near-duplicate,
// naming it; an unrelated task is not.
func TestAuditRejectsNearDuplicatesOfHarborEvalDirs(t *testing.T) {
	testinfra.Long(t)
	bw := testinfra.Bubblewrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := testinfra.Store(t)
	l := testinfra.Log(t)

	build := func(refs []taskgen.StepRef) *harbor.Task {
		t.Helper()
		sp, err := taskgen.Build(refs)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := sp.Task(0)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	held := build([]taskgen.StepRef{{Name: "source.log", Seed: 7, Input: -1}, {Name: "text.count", Seed: 8, Input: 0}})
	root := t.TempDir() // a dataset root: one task directory inside
	if err := held.Write(filepath.Join(root, "held-out")); err != nil {
		t.Fatal(err)
	}
	refs, err := eval.References(eval.Suite{Dirs: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || !strings.HasPrefix(refs[0].Name, "eval-") {
		t.Fatalf("references %+v, want the one task of the directory", refs)
	}
	testinfra.RunStage(t, l, audit.NewStage(audit.StageConfig{Store: st, Trial: trial.Options{Backend: bw},
		Settings: audit.DefaultSettings(), References: refs}), testinfra.Runner(2))

	copied, err := harbor.From(held).Name("syn-copied").Instruction(strings.ToUpper(held.Instruction)).Build()
	if err != nil {
		t.Fatal(err)
	}
	other := build([]taskgen.StepRef{{Name: "source.csv", Seed: 3, Input: -1}, {Name: "csv.sort", Seed: 4, Input: 0}})
	for _, tk := range []*harbor.Task{copied, other} {
		key, sum, size, err := trial.PutBundle(ctx, st, "pool", tk.Name, tk)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := engine.NewRootEvent("pool", schemas.TaskSynthesized, tk.Name, schemas.TaskSynthesizedPayload{
			TaskID: tk.Name, Bundle: schemas.ObjectRef{Key: key, Bytes: size, SHA256: sum}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	testinfra.CheckFor(t, time.Minute, func() error {
		if n := testinfra.Count(t, l, "t1.pool."+schemas.TaskAudited); n != 2 {
			return fmt.Errorf("%d of 2 tasks audited", n)
		}
		return nil
	})
	for _, ev := range testinfra.Events(t, l, "t1.pool."+schemas.TaskAudited) {
		var p schemas.TaskAuditedPayload
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rows, err := schemas.ReadRows[schemas.AuditRow](ctx, st, p.Audit.Key, &p.Audit)
		if err != nil || len(rows) != 1 {
			t.Fatalf("audit row of %s: %v", p.TaskID, err)
		}
		dup := slices.Contains(p.RejectReasons, audit.NearDuplicate)
		switch p.TaskID {
		case copied.Name:
			if p.Decision != "reject" || !dup || rows[0].NearDupOf != refs[0].Name {
				t.Fatalf("copy of the held-out task: %s %v, near duplicate of %q (want %s)", p.Decision, p.RejectReasons, rows[0].NearDupOf, refs[0].Name)
			}
		case other.Name:
			if dup || rows[0].NearDupOf != "" {
				t.Fatalf("an unrelated task was called a near duplicate of %q", rows[0].NearDupOf)
			}
		}
	}
}
