// Package branch_test replays each stage of a finished run into branches,
// with and without --continue, on the real event log, store and
// sandboxes, and checks the branches' events and tables, the frozen
// settings they keep or override, and that the source run is untouched.
package branch_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/digest"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/pipelinetest"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

const parent = "main"

var allStages = []string{"control", "synth", "audit", "rollout", "reward", "critic", "ppo", "sft", "eval"}

// tiny is the smallest run with every stage: two seed tasks, supervised
// fine-tuning of two steps, one attempt per task, one evaluation task, two
// iterations; with -short one iteration and no fine-tuning. Its reward
// scale is 3.
func tiny(t *testing.T) config.Config {
	cfg := pipelinetest.Config(t)
	c := &cfg.Stages.Control
	c.PoolTarget, c.Rounds, c.Seeds, c.Iterations, c.Attempts, c.MaxTurns, c.SFTSteps = 2, 1, 2, 2, 1, 2, 2
	if testing.Short() {
		c.Iterations, c.SFTSteps = 1, 0
	}
	cfg.Stages.Eval.Tasks, cfg.Stages.Eval.Rounds, cfg.Stages.Eval.Attempts = 1, 0, 1
	cfg.Stages.Rollout.MaxNewTokens, cfg.Stages.Rollout.Context = 24, 512
	cfg.Training.Warmup.Steps = 1
	cfg.Stages.Reward.Scale = 3
	return cfg
}

type env struct {
	t   *testing.T
	ctx context.Context
	l   *engine.Log
	st  store.ObjectStore
}

func (e env) count(run, typ string) int { return testinfra.Count(e.t, e.l, engine.Subject(run, typ)) }

func (e env) waitEnd(runs ...string) {
	e.t.Helper()
	testinfra.CheckFor(e.t, 4*time.Minute, func() error {
		for _, run := range runs {
			if n := e.count(run, schemas.RunFailed); n > 0 {
				var p schemas.RunCompletedPayload
				testinfra.Events(e.t, e.l, engine.Subject(run, schemas.RunFailed))[0].Decode(&p)
				e.t.Fatalf("run %s failed: %s", run, p.Reason)
			}
			if e.count(run, schemas.RunCompleted) == 0 {
				all, _ := e.l.EventCounts(e.ctx, run)
				return fmt.Errorf("run %s not complete: %v", run, all[run])
			}
		}
		return nil
	})
}

// decoded returns run's events of typ, decoded.
func decoded[T any](e env, run, typ string) []T {
	e.t.Helper()
	var out []T
	for _, ev := range testinfra.Events(e.t, e.l, engine.Subject(run, typ)) {
		var p T
		if err := ev.Decode(&p); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// own fails unless every key is the run's own.
func (e env) own(run, what string, ks ...string) {
	e.t.Helper()
	for _, k := range ks {
		if k != "" && !strings.HasPrefix(k, keys.Run(run)) {
			e.t.Errorf("%s of %s: %s is not under %s", what, run, k, keys.Run(run))
		}
	}
}

// outputs checks what the stage wrote into run: each output's objects
// under the run's keys, its rows stamped with the run, no failure.
func (e env) outputs(run, stage string) {
	e.t.Helper()
	switch stage {
	case "rollout":
		for _, p := range decoded[schemas.RolloutCompletedPayload](e, run, schemas.RolloutCompleted) {
			e.own(run, "rollout.completed", p.Trajectory.Key, p.TokenRows.Key, p.TurnRows.Key, p.RoutingRows.Key, p.Snapshot.Key)
			if p.Purpose != schemas.PurposeEval { // eval stores its suite in the run it evaluates
				e.own(parent, "the bundle a branch's attempt played", p.Bundle.Key)
			}
			rows, err := schemas.ReadRows[schemas.TrajectoryRow](e.ctx, e.st, p.Trajectory.Key, &p.Trajectory)
			if err != nil || len(rows) != 1 || rows[0].Run != run {
				e.t.Errorf("trajectory of %s: %v %+v", run, err, rows)
			}
		}
	case "reward":
		for _, p := range decoded[schemas.RewardScoredPayload](e, run, schemas.RewardScored) {
			e.own(run, "reward.scored", p.Rewards.Key)
		}
	case "critic":
		for _, p := range decoded[schemas.CriticUpdatedPayload](e, run, schemas.CriticUpdated) {
			e.own(run, "critic.updated", p.Manifest.Key, p.Checkpoint.Key, p.Values[0].Key)
			rows, err := schemas.ReadRows[schemas.ValueRow](e.ctx, e.st, p.Values[0].Key, &p.Values[0])
			if err != nil || len(rows) == 0 || rows[0].Run != run {
				e.t.Errorf("values of %s: %v, %d rows", run, err, len(rows))
			}
		}
	case "ppo":
		for _, p := range decoded[schemas.PolicyUpdatedPayload](e, run, schemas.PolicyUpdated) {
			e.own(run, "policy.updated", p.Checkpoint.Key, p.Metrics.Key)
			rows, err := schemas.ReadRows[schemas.MetricRow](e.ctx, e.st, p.Metrics.Key, &p.Metrics)
			if err != nil || len(rows) != 1 || rows[0].Run != run {
				e.t.Errorf("metrics of %s: %v %+v", run, err, rows)
			}
		}
	case "sft":
		for _, p := range decoded[schemas.SFTCompletedPayload](e, run, schemas.SFTCompleted) {
			e.own(run, "sft.completed", p.Checkpoint.Key)
		}
	case "eval":
		for _, p := range decoded[schemas.EvalCompletedPayload](e, run, schemas.EvalCompleted) {
			e.own(run, "eval.completed", p.Results[0].Key)
			rows, err := schemas.ReadRows[schemas.EvalResultRow](e.ctx, e.st, p.Results[0].Key, &p.Results[0])
			if err != nil || len(rows) != p.Attempts || rows[0].Run != run {
				e.t.Errorf("eval results of %s: %v, %d rows for %d attempts", run, err, len(rows), p.Attempts)
			}
		}
	}
	counts, err := e.l.EventCounts(e.ctx, run)
	if err != nil {
		e.t.Fatal(err)
	}
	for typ, n := range counts[run] {
		if strings.HasSuffix(typ, ".failed") {
			e.t.Errorf("branch %s: %d %s", run, n, typ)
		}
	}
}

// Every stage replays into a branch of a finished run, with and without
// --continue; frozen settings stay the parent's unless overridden; the
// parent's digest does not change.
func TestReplayEveryStageIntoABranch(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	cfg := tiny(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := env{t: t, ctx: ctx, l: testinfra.Log(t), st: testinfra.Store(t)}
	rc := testinfra.Runner(2)

	p, stop := pipelinetest.Start(t, cfg, e.l, e.st, rc, allStages)
	root, err := engine.NewRootEvent(parent, schemas.RunStarted, p.Hash(), p.Started())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Publish(ctx, root); err != nil {
		t.Fatal(err)
	}
	e.waitEnd(parent)
	// Nothing consumes what the replays without --continue emit.
	stop()
	before, err := digest.Compute(ctx, e.l, e.st, parent)
	if err != nil {
		t.Fatal(err)
	}
	iterations := cfg.Stages.Control.Iterations
	// Versions the parent made: the fine-tuned one, then one per update.
	sft, stages := 1, []string{"rollout", "reward", "critic", "ppo", "sft", "eval"}
	if cfg.Stages.Control.SFTSteps == 0 {
		sft, stages = 0, []string{"rollout", "reward", "critic", "ppo", "eval"}
	}
	pool := decoded[schemas.PoolSealedPayload](e, parent, schemas.PoolSealed)[0].Tasks

	// A branch replays under a configuration of another reward scale: the
	// parent's froze 3.
	rcfg := cfg
	rcfg.Stages.Reward.Scale = 1
	rp, err := pipeline.Build(rcfg, e.l, e.st, pipeline.WithWorkDir(testinfra.WorkDir()))
	if err != nil {
		t.Fatal(err)
	}
	branch := func(o pipeline.BranchOptions) engine.BranchResult {
		t.Helper()
		o.Parent = parent
		res, err := rp.Branch(ctx, e.l, o)
		if err != nil {
			t.Fatalf("branch %s: %v", o.Into, err)
		}
		if res.Inputs == 0 || res.Failed != 0 {
			t.Fatalf("branch %s: %+v", o.Into, res)
		}
		return res
	}

	// Without --continue: each stage over every input of the parent.
	inputs := map[string]string{"rollout": schemas.RolloutRequested, "reward": schemas.RolloutCompleted, "critic": schemas.BatchReady,
		"ppo": schemas.CriticUpdated, "sft": schemas.SFTRequested}
	outputs := map[string]string{"rollout": schemas.RolloutCompleted, "reward": schemas.RewardScored, "critic": schemas.CriticUpdated,
		"ppo": schemas.PolicyUpdated, "sft": schemas.SFTCompleted, "eval": schemas.EvalCompleted}
	for _, stage := range stages {
		into := "replayed-" + stage
		branch(pipeline.BranchOptions{Stage: stage, Into: into})
		want := e.count(parent, outputs[stage])
		if in, ok := inputs[stage]; ok && e.count(parent, in) != want {
			t.Fatalf("the parent has %d %s for %d %s", e.count(parent, in), in, want, outputs[stage])
		}
		if got := e.count(into, outputs[stage]); got != want {
			t.Errorf("%s: %d %s, the parent %d", into, got, outputs[stage], want)
		}
		e.outputs(into, stage)
		r, err := report.Load(ctx, e.l, e.st, into)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != report.StatusReplayed || r.Config.Parent != parent || r.Config.Branch == nil || r.Config.Branch.Stage != stage {
			t.Errorf("%s: status %s, config %+v", into, r.Status, r.Config)
		}
		if e.count(into, schemas.RunCompleted)+e.count(into, schemas.IterationStarted)+e.count(into, schemas.BatchReady) != 0 {
			t.Errorf("%s: control decided for a branch that only replays", into)
		}
	}
	// The frozen scale: the parent's, whatever the configuration says,
	// unless the branch overrides it, which its report shows.
	branch(pipeline.BranchOptions{Stage: "reward", Into: "rescaled", Set: map[string]string{"reward_scale": "2"}})
	for run, want := range map[string]float64{"replayed-reward": 3, "rescaled": 2} {
		for _, p := range decoded[schemas.RewardScoredPayload](e, run, schemas.RewardScored) {
			rows, err := schemas.ReadRows[schemas.RewardRow](e.ctx, e.st, p.Rewards.Key, &p.Rewards)
			if err != nil || len(rows) != 1 || rows[0].Scale != want || rows[0].Reward != want*float64(rows[0].Passed) && !rows[0].Fallback {
				t.Errorf("%s: rewards %+v (%v), want scale %v", run, rows, err, want)
			}
		}
	}
	r, err := report.Load(ctx, e.l, e.st, "rescaled")
	if err != nil {
		t.Fatal(err)
	}
	md, _, err := report.Render([]*report.Run{r})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| reward scale | 2 (set for the branch; main: 3) |") {
		t.Errorf("the report of the rescaled branch does not show the override:\n%s", md)
	}
	if _, err := rp.Branch(ctx, e.l, pipeline.BranchOptions{Stage: "reward", Parent: parent, Into: "bad", Set: map[string]string{"model.layers": "9"}}); err == nil {
		t.Error("a branch changed the model's shape")
	}
	if _, err := rp.Branch(ctx, e.l, pipeline.BranchOptions{Stage: "reward", Parent: parent, Into: "rescaled", Set: map[string]string{"reward_scale": "5"}}); err == nil {
		t.Error("a branch was opened again with other settings")
	}

	// With --continue: the branch re-runs the stage at an iteration and
	// goes on as a run of its own.
	if _, stopAgain := pipelinetest.Start(t, cfg, e.l, e.st, rc, allStages); stopAgain == nil {
		t.Fatal("no stages")
	}
	at := map[string]int{"rollout": 0, "reward": 0, "critic": iterations - 1, "ppo": iterations - 1, "sft": 0, "eval": 0}
	var continued []string
	for _, stage := range stages {
		into := "continued-" + stage
		branch(pipeline.BranchOptions{Stage: stage, Into: into, Continue: true, Iteration: at[stage]})
		continued = append(continued, into)
	}
	e.waitEnd(continued...)
	for _, stage := range stages {
		into := "continued-" + stage
		e.outputs(into, stage)
		r, err := report.Load(ctx, e.l, e.st, into)
		if err != nil {
			t.Fatal(err)
		}
		b := r.Config.Branch
		if r.Status != report.StatusCompleted || r.Config.Parent != parent || b == nil || !b.Continue || b.Stage != stage || r.Config.RewardScale != 3 {
			t.Errorf("%s: status %s, config %+v", into, r.Status, r.Config)
		}
		// What the branch did itself: the iterations from its branch
		// point on, and the evaluations of the versions it made.
		redone := iterations - at[stage]
		want := map[string]int{schemas.PolicyUpdated: redone, schemas.RunCompleted: 1}
		switch stage {
		case "rollout":
			// Its training attempts and the last version's evaluation.
			want[schemas.RolloutCompleted] = redone*pool*cfg.Stages.Control.Attempts + 1
		case "reward":
			want[schemas.BatchReady] = redone
		case "sft":
			want[schemas.SFTCompleted] = 1
			want[schemas.EvalCompleted] = e.count(parent, schemas.EvalCompleted) - 1 // not the base policy's
		case "eval":
			want[schemas.PolicyUpdated] = 0
			want[schemas.EvalCompleted] = e.count(parent, schemas.EvalCompleted)
		case "critic", "ppo":
			want[schemas.EvalCompleted] = 1
		}
		for typ, n := range want {
			if got := e.count(into, typ); got != n {
				t.Errorf("%s: %d %s, want %d", into, got, typ, n)
			}
		}
		// Its report shows every policy's evaluation once: those it took
		// over, named as the parent's, and its own.
		own, inherited := 0, 0
		seen := map[int64]bool{}
		for _, ev := range r.Evals {
			if seen[ev.PolicyVersion] {
				t.Errorf("%s: v%d evaluated twice in its report", into, ev.PolicyVersion)
			}
			seen[ev.PolicyVersion] = true
			switch ev.From {
			case "":
				own++
			case parent:
				inherited++
			default:
				t.Errorf("%s: an evaluation from %q", into, ev.From)
			}
		}
		if own != e.count(into, schemas.EvalCompleted) || own+inherited != e.count(parent, schemas.EvalCompleted) {
			t.Errorf("%s: its report has %d evaluations of its own and %d of %s's, want %d and %d in all", into, own, inherited, parent, e.count(into, schemas.EvalCompleted), e.count(parent, schemas.EvalCompleted))
		}
	}

	after, err := digest.Compute(ctx, e.l, e.st, parent)
	if err != nil {
		t.Fatal(err)
	}
	if d := before.Diff(after); before.SHA256 != after.SHA256 || len(d) > 0 {
		t.Errorf("the parent changed: %v", d)
	}

	lines, err := report.Runs(ctx, e.l)
	if err != nil {
		t.Fatal(err)
	}
	byRun := map[string]report.RunLine{}
	for _, l := range lines {
		byRun[l.Run] = l
	}
	if m := byRun[parent]; m.Status != report.StatusCompleted || m.Parent != "" || m.Iterations != iterations || len(m.PolicyVersions) != iterations+sft || m.LastEvent.IsZero() {
		t.Errorf("runs: the parent %+v", m)
	}
	if c := byRun["continued-ppo"]; c.Status != report.StatusCompleted || c.Parent != parent || c.Branch == nil || c.Branch.Iteration != iterations-1 ||
		len(c.PolicyVersions) != 1 || c.PolicyVersions[0] != int64(iterations+sft) {
		t.Errorf("runs: continued-ppo %+v", c)
	}
	if r := byRun["rescaled"]; r.Status != report.StatusReplayed || r.Parent != parent || len(r.Branch.Overrides) != 1 || r.Branch.Overrides[0] != (schemas.Override{Key: "reward_scale", Value: "2", Parent: "3"}) {
		t.Errorf("runs: rescaled %+v", r)
	}
}
