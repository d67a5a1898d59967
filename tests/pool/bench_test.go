package pool_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/stages/audit"
	"github.com/t1pipe/t1/stages/synth"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trial"
)

// BenchmarkSynthesizeAndAudit is the work behind one accepted task: grow a
// child of a seed, keep it by execution (oracle, parent's solution), then
// audit it (oracle and null runs) — every sandbox fresh.
func BenchmarkSynthesizeAndAudit(b *testing.B) {
	bw := &sandbox.Bubblewrap{}
	if err := bw.Available(); err != nil {
		b.Skip(err)
	}
	opt := trial.Options{Backend: bw}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	accepted := 0
	for range b.N {
		parentRefs := taskgen.Seed(taskgen.Full, rng)
		refs, err := taskgen.Extend(taskgen.Full, parentRefs, 2, rng)
		if err != nil {
			b.Fatal(err)
		}
		parent, _ := taskgen.Build(parentRefs)
		child, _ := taskgen.Build(refs)
		tk, err := child.Task(1)
		if err != nil {
			b.Fatal(err)
		}
		dir := filepath.Join(b.TempDir(), tk.Name)
		v, err := synth.Execute(ctx, child, parent, tk, dir, opt)
		if err != nil {
			b.Fatal(err)
		}
		if !v.Keep {
			continue
		}
		null, err := trial.Run(ctx, dir, tk, nil, opt)
		if err != nil {
			b.Fatal(err)
		}
		verdict := audit.Audit(audit.Evidence{Task: tk,
			Oracle: audit.Run{SolutionExit: v.Oracle.SolutionExit, Report: v.Oracle.Report},
			Null:   audit.Run{SolutionExit: null.SolutionExit, Report: null.Report}}, audit.DefaultSettings())
		if verdict.Accept {
			accepted++
		}
	}
	b.ReportMetric(float64(accepted)/b.Elapsed().Minutes(), "accepted/min")
}
