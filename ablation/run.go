package ablation

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/t1pipe/t1/execute"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/report"
)

// Execute runs every run of p to its end on in's servers, writing their
// progress to w, and writes the report that compares them; an ablation
// that was stopped returns what it has with exit.ErrStopped, and resumes
// where it stopped when run again.
func Execute(ctx context.Context, w io.Writer, in *local.Infra, p *Plan) (*Summary, error) {
	sum, err := ablate(ctx, w, in, p.Runs, p.jobs)
	if err != nil {
		return nil, err
	}
	sum.Variants = p.Variants
	if sum.Stopped {
		return sum, exit.ErrStopped
	}
	o := p.options
	if len(o.RLSeeds) > 0 {
		sum.RLSeeds = o.RLSeeds
	}
	if len(o.Seeds) > 0 {
		sum.PoolSeed, sum.ModelSeed = p.poolSeed, o.ModelSeed
	}
	if len(o.Seeds) > 0 || len(o.RLSeeds) > 0 {
		byGroup := map[string][]*execute.Summary{}
		for _, r := range sum.Runs {
			byGroup[p.groupOf[r.Run]] = append(byGroup[p.groupOf[r.Run]], r)
		}
		sum.Spread = spread(p.groups, byGroup)
		sum.Gains = gains(p.groups, byGroup, sum.results)
	}
	return sum, nil
}

// ablate runs each planned run to its end and writes the comparison
// report of all of them under the first one's run. The runs of their own
// go first, jobs at once, then the branches (each after its base run has
// completed), jobs at once. Every run's stages are its own (execute.Own),
// so runs of different configurations in this process never handle each
// other's events.
func ablate(ctx context.Context, w io.Writer, in *local.Infra, plan []Run, jobs int) (*Summary, error) {
	sum := &Summary{Base: plan[0].Config.Run.ID}
	out := make([]*execute.Summary, len(plan))
	var mu sync.Mutex
	for _, branches := range []bool{false, true} {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(max(jobs, 1))
		for i, r := range plan {
			if r.Branch != branches {
				continue
			}
			g.Go(func() error {
				// Each line names the run it is about: runs at once
				// write to the same terminal.
				cw := w
				if jobs > 1 && len(plan) > 1 {
					cw = &prefixWriter{mu: &mu, w: w, prefix: r.Config.Run.ID + "  "}
				}
				s, err := ablateRun(gctx, cw, in, r)
				if err != nil || s == nil {
					return err
				}
				out[i] = s
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			// A run stopped: a branch would start from a base run that
			// has not ended.
			break
		}
	}
	for _, s := range out {
		if s == nil {
			fmt.Fprintf(w, "stopped; run `t1 ablate` again to resume\n")
			sum.Stopped = true
			return sum, nil
		}
		sum.Runs = append(sum.Runs, s)
	}
	runs := make([]*report.Run, len(plan))
	sum.results = map[string][]report.EvalResult{}
	for i, p := range plan {
		r, err := report.Load(ctx, in.Log, in.Store, p.Config.Run.ID)
		if err != nil {
			return nil, err
		}
		runs[i] = r
		sum.results[r.ID] = r.EvalResults
	}
	md, html, err := report.Render(runs)
	if err != nil {
		return nil, err
	}
	if sum.Report, err = in.WriteRunFile(ctx, sum.Base, "", keys.Ablation(sum.Base), "text/markdown", md); err != nil {
		return nil, err
	}
	if sum.HTML, err = in.WriteRunFile(ctx, sum.Base, "", keys.AblationHTML(sum.Base), "text/html; charset=utf-8", html); err != nil {
		return nil, err
	}
	return sum, nil
}

// ablateRun runs r to its end on in's servers; nil when ctx ends first.
func ablateRun(ctx context.Context, w io.Writer, in *local.Infra, r Run) (*execute.Summary, error) {
	c := r.Config
	// The servers, store and log are shared; only what the stages are
	// built from changes between runs.
	vin := *in
	vin.Config = c
	var s *execute.Summary
	var err error
	ended := false
	if r.Branch {
		// A branch that ended is not branched again: that would re-run
		// its stage (a whole fine-tuning, for sft) to emit nothing new.
		if ended, err = execute.Ended(ctx, in.Log, c.Run.ID); err != nil {
			return nil, fmt.Errorf("run %s: %w", c.Run.ID, err)
		}
	}
	if r.Branch && !ended {
		fmt.Fprintf(w, "== run %s: a branch of %s at %s, iteration 0\n", c.Run.ID, r.Parent, r.Stage)
		var out execute.Replay
		out, err = execute.Continue(ctx, w, &vin, pipeline.BranchOptions{Stage: r.Stage, Parent: r.Parent, Into: c.Run.ID, Continue: true, Set: r.Set}, execute.Own)
		s = out.Branch
	} else {
		fmt.Fprintf(w, "== run %s\n", c.Run.ID)
		s, err = execute.Run(ctx, w, &vin, execute.Own)
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", c.Run.ID, err)
	}
	if s != nil {
		// An ended run's own consumers have nothing left to deliver, and a
		// stream holds at most 1000: an ablation's nine per run would fill
		// it after a hundred runs. A later command that runs a stage of the
		// run makes its consumer again.
		if err := in.Log.DeleteRunConsumers(ctx, c.Run.ID); err != nil {
			return nil, fmt.Errorf("run %s: %w", c.Run.ID, err)
		}
	}
	return s, nil
}

// prefixWriter starts every line written through it with prefix, one
// Write at a time across the writers sharing mu, so that the progress of
// runs at once stays readable line by line.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	mid    bool // the last Write ended inside a line
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	var buf bytes.Buffer
	for len(b) > 0 {
		if !p.mid {
			buf.WriteString(p.prefix)
		}
		line, rest, found := bytes.Cut(b, []byte("\n"))
		buf.Write(line)
		if found {
			buf.WriteByte('\n')
		}
		p.mid, b = !found, rest
	}
	if _, err := p.w.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return n, nil
}
