package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/lineage"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/trainer"
)

func runCmd(g *globals) *cobra.Command {
	var noStages bool
	cmd := &cobra.Command{
		Use:   "run [--no-stages]",
		Short: "Run the whole pipeline in one process on the configured (by default embedded) NATS and S3",
		Long: `Runs every stage in this process — control, synth, audit, rollout, reward, critic, ppo and
eval — on embedded NATS and S3 unless the configuration points elsewhere, sampling from the
configured engine (inference.backend: the in-process reference MoE, or an SGLang or vLLM
server, which must answer at inference.url before anything starts and is made to load each
new policy version). Progress goes to stderr; a summary and the report's path go to stdout.
Interrupting stops cleanly; running again with the same configuration resumes from the log.
With --no-stages this process runs no stage: it starts the run and follows it to its end while
the stages run elsewhere as ` + "`t1 worker --stage S`" + ` processes on the same NATS and S3 (for
example beside ` + "`t1 infra up`" + ` on the data directory).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ck := cfg.Inference.Checkpoint; ck != "" && inference.IsLocalCheckpoint(ck) {
				// An initial checkpoint the exec trainer could not start
				// from (no weights, a shard missing) fails the run now, not
				// when its first rollout stores it as version 0.
				dir, err := filepath.Abs(ck)
				if err != nil {
					return err
				}
				if err := trainer.CheckInitial(ctx, dir); err != nil {
					return err
				}
			}
			if !noStages {
				// An engine that is not there fails the run now, not at
				// its first rollout after synthesis and audit.
				if err := inference.Probe(ctx, pipeline.InferenceOptions(cfg.Inference)); err != nil {
					return infraError(err)
				}
			}
			in, err := connect(ctx, cfg, local.Options{Serve: true})
			if err != nil {
				return err
			}
			defer in.Close()
			return runPipeline(ctx, cmd, g, in, !noStages)
		},
	}
	cmd.Flags().BoolVar(&noStages, "no-stages", false, "start and follow the run only; t1 worker processes run its stages")
	return cmd
}

type pipelineSummary struct {
	Run    string            `json:"run"`
	Status string            `json:"status"` // completed | failed | stopped
	Reason string            `json:"reason,omitempty"`
	Events map[string]uint64 `json:"events"`
	Evals  []evalLine        `json:"evals,omitempty"`
	// Recipe is the base → SFT → RL table (report.Recipe).
	Recipe     []report.RecipeRow `json:"recipe,omitempty"`
	Dead       uint64             `json:"dead_letters"`
	Elapsed    time.Duration      `json:"elapsed_ns"`
	PolicyLast int64              `json:"policy_version"`
	// ExitCode is the code the command ends with (README's table).
	ExitCode int `json:"exit_code"`
	reportFiles
}

type evalLine struct {
	Suite         string  `json:"suite"`
	PolicyVersion int64   `json:"policy_version"`
	Attempts      int     `json:"attempts"`
	Unscored      int     `json:"unscored,omitempty"`
	ResolveRate   float64 `json:"resolve_rate"`
	MeanReward    float64 `json:"mean_reward"`
	MeanTurns     float64 `json:"mean_turns"`
}

// stagesAt says where the stages of a run that executePipeline follows
// run.
type stagesAt int

const (
	// stagesElsewhere: t1 worker processes run them.
	stagesElsewhere stagesAt = iota
	// stagesShared: this process, on the log's consumers of every run, so
	// t1 worker processes of a stage may share its load.
	stagesShared
	// stagesOwn: this process, for this run alone (every consumer is
	// <stage>_<run>), so that runs of other configurations can run in the
	// same process at once without one's stages handling the other's
	// events.
	stagesOwn
)

func runPipeline(ctx context.Context, cmd *cobra.Command, g *globals, in *local.Infra, stages bool) error {
	at := stagesElsewhere
	if stages {
		at = stagesShared
	}
	sum, err := executePipeline(ctx, cmd.ErrOrStderr(), in, at, nil)
	if err != nil {
		return err
	}
	if sum == nil {
		if g.json {
			if err := printJSON(cmd, pipelineSummary{Run: in.Config.Run.ID, Status: "stopped", ExitCode: exitStopped}); err != nil {
				return err
			}
		}
		return errStopped
	}
	if g.json {
		if err := printJSON(cmd, sum); err != nil {
			return err
		}
	} else {
		printPipelineSummary(cmd.OutOrStdout(), *sum)
	}
	if sum.Status == "failed" {
		return withCode(exitFailed, fmt.Errorf("run %s failed: %s (t1 events list --run %s --type run.failed)", sum.Run, sum.Reason, sum.Run))
	}
	return nil
}

// executePipeline runs in.Config's run to its end, its stages where at
// says, writing progress to w, and returns its summary once the report is
// written; nil when ctx ends first (a later call resumes the run). branch
// is where a continued branch started (nil for a run of its own).
func executePipeline(ctx context.Context, w io.Writer, in *local.Infra, at stagesAt, branch *branchStart) (*pipelineSummary, error) {
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
	ended, err := runEnded(ctx, in.Log, run)
	if err != nil {
		return nil, infraError(err)
	}
	// A run that ended needs no stage: consumers of its own (t1 ablate's
	// <stage>_<run>) would deliver its whole history again, every handler
	// redoing its work only to find its outputs stored.
	if at == stagesElsewhere || ended {
		mine = nil
	}
	// The stages that must run once per run (control, eval) run for this
	// run alone, leased for it, so that no process elsewhere folds this
	// run beside this one, while other processes run them for other runs.
	var serial []engine.Stage
	for _, s := range mine {
		if isSerial(s) {
			serial = append(serial, s)
		}
	}
	release, err := holdLeases(stageCtx, in.Log, serial, run, defaultLeaseTTL, func(err error) {
		select {
		case errs <- infraError(fmt.Errorf("lease lost: %w", err)):
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	defer release()
	for _, s := range mine {
		r := engine.NewRunner(in.Log, s, runnerConfig(cfg, p, s, run, at == stagesOwn))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(stageCtx); err != nil {
				errs <- infraError(fmt.Errorf("stage %s: %w", s.Name(), err))
			}
		}()
	}
	started, exists, err := lineage.Started(ctx, in.Log, run)
	if err != nil {
		return nil, infraError(err)
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
	prog := newPipelineProgress(w, sc)
	prog.branch = branch
	sum := pipelineSummary{Run: run}
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
			sum.Status, sum.ExitCode = "failed", exitFailed
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
		sum.Evals = append(sum.Evals, evalLine{e.Suite, e.PolicyVersion, e.Attempts, e.Unscored, e.ResolveRate, e.MeanReward, e.MeanTurns})
	}
	sum.Recipe = report.Recipe(r)
	if sum.reportFiles, err = saveReport(ctx, in, []*report.Run{r}, ""); err != nil {
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

// runEnded reports whether run has completed or failed.
func runEnded(ctx context.Context, log *engine.Log, run string) (bool, error) {
	for _, typ := range []string{schemas.RunCompleted, schemas.RunFailed} {
		ok, err := log.HasEvent(ctx, run, typ)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// failedTotal counts the run's failed events of every type.
func failedTotal(counts map[string]uint64) uint64 {
	var n uint64
	for t, c := range counts {
		if strings.HasSuffix(t, ".failed") && t != schemas.RunFailed {
			n += c
		}
	}
	return n
}

type pipelineProgress struct {
	w     io.Writer
	sc    config.Stages
	tty   bool
	last  time.Time
	stage string // of the last line
	// branch is where a continued branch left its parent (nil: a run of
	// its own).
	branch *branchStart
	// scored0 is the rewards already scored when this command began
	// watching: a resumed run's rate counts only what it scored since.
	scored0 *uint64
}

func newPipelineProgress(w io.Writer, sc config.Stages) *pipelineProgress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &pipelineProgress{w: w, sc: sc, tty: tty}
}

// branchStart is what a continued branch's progress needs of its start:
// the stage it re-ran, how many of its attempts were its parent's
// requests (re-run at rollout or re-scored at reward), which its own
// rollout.requested events do not count, and the latest policy version
// it took over, which its own sft.completed and policy.updated events
// count on from.
type branchStart struct {
	stage     string
	inherited uint64
	version   int64
}

func newBranchStart(stage string, res engine.BranchResult, version int64) *branchStart {
	b := &branchStart{stage: stage, version: version}
	if stage == "rollout" || stage == "reward" {
		b.inherited = uint64(res.Inputs)
	}
	return b
}

func (p *pipelineProgress) update(c map[string]uint64, elapsed time.Duration) {
	stage := "synth"
	requested := c[schemas.RolloutRequested]
	// Every fine-tuning and every update, a skipped one too, makes a version.
	version := int64(c[schemas.SFTCompleted] + c[schemas.PolicyUpdated])
	if p.branch != nil {
		requested += p.branch.inherited
		version += p.branch.version
	}
	switch {
	case c[schemas.RunCompleted]+c[schemas.RunFailed] > 0:
		stage = "done"
	case c[schemas.PolicyUpdated] > 0 || c[schemas.BatchReady] > 0:
		stage = fmt.Sprintf("train (iteration %d/%d)", min(int(c[schemas.PolicyUpdated])+1, p.sc.Control.Iterations), p.sc.Control.Iterations)
	case c[schemas.SFTRequested] > c[schemas.SFTCompleted]:
		stage = "sft (fine-tuning on demonstrations)"
	case c[schemas.PoolSealed] > 0 && c[schemas.RolloutRequested] > 0 && c[schemas.SFTRequested] == 0 && p.sc.Control.SFTSteps > 0:
		stage = "sft (playing demonstrations)"
	case c[schemas.PoolSealed] > 0:
		stage = fmt.Sprintf("rollout (iteration 1/%d)", p.sc.Control.Iterations)
	case c[schemas.TaskAudited] > 0:
		stage = "synth + audit"
	case p.branch != nil && p.branch.stage == "eval":
		// Re-evaluating the parent's policies before any training.
		stage = "eval"
	case p.branch != nil && p.branch.stage == "sft" && c[schemas.SFTCompleted] == 0:
		stage = "sft (fine-tuning on demonstrations)"
	case p.branch != nil && (p.branch.stage == "critic" || p.branch.stage == "ppo"):
		stage = fmt.Sprintf("train (iteration 1/%d)", p.sc.Control.Iterations)
	case p.branch != nil || (c[schemas.TaskSynthesized] == 0 && c[schemas.RolloutRequested] > 0):
		// A continued branch: its pool and fine-tuning are its parent's.
		stage = fmt.Sprintf("rollout (iteration 1/%d)", p.sc.Control.Iterations)
	}
	// Logs and CI get a line every few seconds and one at each change of
	// stage, terminals a live line.
	if !p.tty && time.Since(p.last) < 5*time.Second && stage == p.stage {
		return
	}
	p.last, p.stage = time.Now(), stage
	if p.scored0 == nil {
		n := c[schemas.RewardScored]
		p.scored0 = &n
	}
	rate := 0.0
	if elapsed >= time.Second {
		rate = float64(c[schemas.RewardScored]-*p.scored0) / elapsed.Minutes()
	}
	tasks := fmt.Sprintf(" · tasks %d synthesised, %d discarded, %d audited", c[schemas.TaskSynthesized], c[schemas.SynthDiscarded], c[schemas.TaskAudited])
	if c[schemas.TaskSynthesized]+c[schemas.SynthDiscarded]+c[schemas.TaskAudited] == 0 && (p.branch != nil || requested > 0) {
		tasks = "" // a continued branch's pool is its parent's
	}
	line := fmt.Sprintf("[%s] %s%s · rollouts %d/%d scored (%.1f/min) · policy v%d · evals %d · %d failed",
		elapsed.Round(time.Second), stage, tasks,
		c[schemas.RewardScored], requested, rate, version, c[schemas.EvalCompleted], failedTotal(c))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *pipelineProgress) finish() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

func printPipelineSummary(w io.Writer, s pipelineSummary) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s (%s)\n", s.Run, s.Status)
	if s.Reason != "" {
		fmt.Fprintf(tw, "reason\t%s\n", s.Reason)
	}
	for _, t := range []string{schemas.TaskSynthesized, schemas.SynthDiscarded, schemas.TaskAudited, schemas.RolloutCompleted,
		schemas.RewardScored, schemas.PolicyUpdated, schemas.EvalCompleted} {
		fmt.Fprintf(tw, "%s\t%d\n", t, s.Events[t])
	}
	fmt.Fprintf(tw, "failed events\t%d\n", failedTotal(s.Events))
	fmt.Fprintf(tw, "dead letters\t%d\n", s.Dead)
	for _, e := range s.Evals {
		unscored := ""
		if e.Unscored > 0 {
			unscored = fmt.Sprintf(", %d unscored: their rollout or reward failed", e.Unscored)
		}
		fmt.Fprintf(tw, "eval %s v%d\tresolve %.2f  partial credit %.2f  turns %.1f  (%d attempts%s)\n", e.Suite, e.PolicyVersion, e.ResolveRate, e.MeanReward, e.MeanTurns, e.Attempts, unscored)
	}
	for _, row := range s.Recipe {
		fmt.Fprintf(tw, "%s %s\tresolve %.2f  partial credit %.2f  turns %.1f  (v%d, %d attempts)\n", row.Suite, row.Label(), row.ResolveRate, row.MeanReward, row.MeanTurns, row.PolicyVersion, row.Attempts)
	}
	fmt.Fprintf(tw, "elapsed\t%s\n", s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(tw, "report\t%s (object %s)\n", s.Report, s.ReportKey)
	fmt.Fprintf(tw, "report html\t%s (object %s)\n", s.HTML, s.HTMLKey)
	tw.Flush()
}
