package execute

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/lineage"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/schemas"
)

// Stages says where the stages of a run that Run follows run.
type Stages int

const (
	// Elsewhere: t1 worker processes run them.
	Elsewhere Stages = iota
	// Shared: this process, on the log's consumers of every run, so t1
	// worker processes of a stage may share its load.
	Shared
	// Own: this process, for this run alone (every consumer is
	// <stage>_<run>), so that runs of other configurations can run in the
	// same process at once without one's stages handling the other's
	// events.
	Own
)

// Run runs in.Config's run to its end, its stages where at says, writing
// progress to w, and returns its summary once the report is written; nil
// when ctx ends first (a later call resumes the run).
func Run(ctx context.Context, w io.Writer, in *local.Infra, at Stages) (*Summary, error) {
	return follow(ctx, w, in, at, nil)
}

// follow is Run of a continued branch that started at branch (nil for a
// run of its own).
func follow(ctx context.Context, w io.Writer, in *local.Infra, at Stages, branch *branchStart) (*Summary, error) {
	cfg := in.Config
	run := cfg.Run.ID
	p, err := pipeline.Build(cfg, in.Log, in.Store, pipeline.WithWorkDir(in.WorkDir))
	if err != nil {
		return nil, err
	}

	stageCtx, stopStages := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopStages(); wg.Wait() }()
	errs := make(chan error, len(p.Stages()))
	mine := p.Stages()
	ended, err := Ended(ctx, in.Log, run)
	if err != nil {
		return nil, exit.InfraError(err)
	}
	// A run that ended needs no stage: consumers of its own (t1 ablate's
	// <stage>_<run>) would deliver its whole history again, every handler
	// redoing its work only to find its outputs stored.
	if at == Elsewhere || ended {
		mine = nil
	}
	// The stages that must run once per run (control, eval) run for this
	// run alone, leased for it, so that no process elsewhere folds this
	// run beside this one, while other processes run them for other runs.
	var serial []engine.Stage
	for _, s := range mine {
		if engine.IsSerial(s) {
			serial = append(serial, s)
		}
	}
	release, err := in.Log.HoldStageLeases(stageCtx, serial, run, engine.DefaultLeaseTTL, func(err error) {
		select {
		case errs <- exit.InfraError(fmt.Errorf("lease lost: %w", err)):
		default:
		}
	})
	if err != nil {
		return nil, exit.InfraError(err)
	}
	defer release()
	for _, s := range mine {
		r := engine.NewRunner(in.Log, s, p.RunnerConfig(s, run, at == Own))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(stageCtx); err != nil {
				errs <- exit.InfraError(fmt.Errorf("stage %s: %w", s.Name(), err))
			}
		}()
	}
	started, exists, err := lineage.Started(ctx, in.Log, run)
	if err != nil {
		return nil, exit.InfraError(err)
	}
	if exists {
		if err := sameConfig(run, started, p.Hash()); err != nil {
			return nil, err
		}
	} else {
		root, err := engine.NewRootEvent(run, schemas.RunStarted, p.Hash(), p.Started())
		if err != nil {
			return nil, err
		}
		if _, err := in.Log.Publish(ctx, root); err != nil {
			return nil, err
		}
	}

	begin := time.Now()
	// The run's own iterations: a branch may have changed its parent's
	// (t1 replay --set iterations=N), which the configuration does not say.
	sc := cfg.Stages
	if st, ok, err := lineage.Started(ctx, in.Log, run); err == nil && ok && st.Iterations > 0 {
		sc.Control.Iterations = st.Iterations
	}
	prog := newProgress(w, sc)
	prog.branch = branch
	sum := Summary{Run: run}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	poller := newCountPoller(in.Log, run)
	for {
		counts, err := poller.poll(ctx)
		if err != nil {
			return nil, err
		}
		sum.Events = counts
		prog.update(counts, time.Since(begin))
		if counts[schemas.RunCompleted] > 0 {
			sum.Status = "completed"
			break
		}
		if counts[schemas.RunFailed] > 0 {
			sum.Status, sum.ExitCode = "failed", exit.Failed
			break
		}
		select {
		case <-ctx.Done():
			prog.finish()
			fmt.Fprintf(w, "stopped; run `t1 run` again to resume run %s\n", run)
			return nil, nil
		case err := <-errs:
			return nil, err
		case <-tick.C:
		}
	}
	prog.finish()
	sum.Elapsed = time.Since(begin)
	r, err := report.Load(ctx, in.Log, in.Store, run)
	if err != nil {
		return nil, err
	}
	sum.Reason, sum.PolicyLast, sum.Dead = r.Reason, r.PolicyVersion, r.DeadLetters
	for _, e := range r.Evals {
		sum.Evals = append(sum.Evals, EvalLine{e.Suite, e.PolicyVersion, e.Attempts, e.Unscored, e.ResolveRate, e.MeanReward, e.MeanTurns})
	}
	sum.Recipe = report.Recipe(r)
	if sum.ReportFiles, err = SaveReport(ctx, in, []*report.Run{r}, ""); err != nil {
		return nil, err
	}
	return &sum, nil
}

// sameConfig refuses to go on with run, started from a configuration of
// another hash: resuming it would add events of this configuration to
// the other's, and a completed run would stand for this configuration's
// figures (t1 ablate skips completed runs). Branches record their own
// hash and are resumed by t1 replay; runs started before the hash was
// recorded are taken as they are.
func sameConfig(run string, st schemas.RunStartedPayload, hash string) error {
	if st.Parent != "" || st.ConfigHash == "" || st.ConfigHash == hash {
		return nil
	}
	return fmt.Errorf("run %s was started from another configuration (hash %s, this one %s): run it with that configuration, or give this one another run.id or data directory", run, st.ConfigHash, hash)
}

// Ended reports whether run has completed or failed.
func Ended(ctx context.Context, log *engine.Log, run string) (bool, error) {
	for _, typ := range []string{schemas.RunCompleted, schemas.RunFailed} {
		ok, err := log.HasEvent(ctx, run, typ)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}
