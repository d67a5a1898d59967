// Package pipeline_test runs the pipeline's stages together on the real
// event log, store and sandboxes, driven by control from run.started.
package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/audit"
	"github.com/t1pipe/t1/stages/control"
	"github.com/t1pipe/t1/stages/eval"
	"github.com/t1pipe/t1/stages/reward"
	"github.com/t1pipe/t1/stages/rollout"
	"github.com/t1pipe/t1/stages/synth"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

const run = "tiny"

// From run.started to the first batch: synthesis rounds, audit, the sealed
// pool, rollouts and rewards of iteration 0, and its batch manifest.
func TestControlDrivesToTheFirstBatch(t *testing.T) {
	bw := testinfra.Bubblewrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st := testinfra.Store(t)
	l := testinfra.Log(t)

	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	mcfg := moe.DefaultConfig()
	model, err := moe.NewModel(mcfg)
	if err != nil {
		t.Fatal(err)
	}
	ref := inference.NewReference(model, tok, moe.BF16, "0")
	policies := func(context.Context, string, int64) (rollout.Policy, error) {
		return rollout.Policy{Engine: ref, Tokenizer: tok, Experts: mcfg.Experts}, nil
	}
	opt := trial.Options{Backend: bw}
	rc := testinfra.Runner(2)
	one := testinfra.Runner(1)
	cc := control.DefaultConfig()
	cc.Seeds, cc.Rounds, cc.PoolTarget, cc.Attempts, cc.MaxTurns, cc.EvalAttempts = 3, 2, 4, 1, 3, 2
	cc.Model = schemas.ModelDims{Vocab: mcfg.Vocab, Layers: mcfg.Layers, TopK: mcfg.TopK, Experts: mcfg.Experts}
	cc.MaxSimilarity = 0.8
	rf, _ := verifier.NewRewardFunc(verifier.ModeCount, 1)
	testinfra.RunStage(t, l, control.NewStage(control.StageConfig{Log: l, Store: st, Config: cc}), one)
	testinfra.RunStage(t, l, synth.New(synth.Config{Store: st, Trial: opt}), rc)
	testinfra.RunStage(t, l, audit.NewStage(audit.StageConfig{Store: st, Trial: opt, Audit: audit.DefaultConfig()}), rc)
	testinfra.RunStage(t, l, rollout.NewStage(rollout.StageConfig{Store: st, Trial: opt, Policies: policies,
		Episode: agent.Config{MaxNewTokens: 32, Context: 1024}}), rc)
	testinfra.RunStage(t, l, reward.New(reward.Config{Store: st, Trial: opt, Reward: rf}), rc)
	suites := map[string]eval.Suite{cc.EvalSuite: {Builtin: true, Tasks: 2, Seed: 99}}
	testinfra.RunStage(t, l, eval.NewStage(eval.StageConfig{Log: l, Store: st, Trial: opt, Suites: suites, MaxTurns: 3}), one)

	ev, err := engine.NewRootEvent(run, schemas.RunStarted, "start", schemas.RunStartedPayload{Seed: 7, Iterations: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	testinfra.CheckFor(t, 3*time.Minute, func() error {
		if n := testinfra.Count(t, l, "t1."+run+"."+schemas.EvalCompleted); n != 1 {
			return fmt.Errorf("baseline evaluation not complete (%d eval attempts scored)", testinfra.Count(t, l, "t1."+run+"."+schemas.RewardScored))
		}
		if n := testinfra.Count(t, l, "t1."+run+"."+schemas.BatchReady); n != 1 {
			return fmt.Errorf("no batch yet: %d audited, %d scored, %d failed, run failed %d",
				testinfra.Count(t, l, "t1."+run+"."+schemas.TaskAudited), testinfra.Count(t, l, "t1."+run+"."+schemas.RewardScored),
				testinfra.Count(t, l, "t1."+run+".*.failed"), testinfra.Count(t, l, "t1."+run+"."+schemas.RunFailed))
		}
		return nil
	})
	if n := testinfra.Count(t, l, "t1."+run+"."+schemas.PoolSealed); n != 1 {
		t.Fatalf("%d pool.sealed events", n)
	}
	var sealed schemas.PoolSealedPayload
	if err := testinfra.Events(t, l, "t1."+run+"."+schemas.PoolSealed)[0].Decode(&sealed); err != nil {
		t.Fatal(err)
	}
	if sealed.Tasks != len(sealed.TaskIDs) || sealed.Tasks+sealed.Excluded != testinfra.Count(t, l, "t1."+run+"."+schemas.TaskAudited)-countRejected(t, l) {
		t.Fatalf("pool %+v", sealed)
	}
	var b schemas.BatchReadyPayload
	if err := testinfra.Events(t, l, "t1."+run+"."+schemas.BatchReady)[0].Decode(&b); err != nil {
		t.Fatal(err)
	}
	m, err := schemas.ReadManifest(ctx, st, b.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if m.Attempts == 0 {
		t.Fatalf("manifest holds %d attempts", m.Attempts)
	}
	// Control decided each thing once.
	for _, typ := range []string{schemas.PoolSealed, schemas.BatchReady} {
		if n := testinfra.Count(t, l, "t1."+run+"."+typ); n != 1 {
			t.Fatalf("%d %s events", n, typ)
		}
	}
	var e schemas.EvalCompletedPayload
	if err := testinfra.Events(t, l, "t1."+run+"."+schemas.EvalCompleted)[0].Decode(&e); err != nil {
		t.Fatal(err)
	}
	if e.PolicyVersion != 0 || e.Tasks == 0 || e.Attempts != 2*e.Tasks || len(e.Results) != 1 || len(e.ByCategory) == 0 {
		t.Fatalf("eval.completed %+v", e)
	}
	rows, err := schemas.ReadRows[schemas.EvalResultRow](ctx, st, e.Results[0].Key, &e.Results[0])
	if err != nil || len(rows) != e.Attempts {
		t.Fatalf("%d eval rows for %d attempts (%v)", len(rows), e.Attempts, err)
	}
	if n := testinfra.Count(t, l, "t1."+run+"."+schemas.RolloutRequested); n != int(m.Attempts)+e.Attempts {
		t.Fatalf("%d rollouts requested, %d in the batch and %d evaluated", n, m.Attempts, e.Attempts)
	}
}

func countRejected(t *testing.T, l *engine.Log) int {
	n := 0
	for _, ev := range testinfra.Events(t, l, "t1."+run+"."+schemas.TaskAudited) {
		var p schemas.TaskAuditedPayload
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Decision != "accept" {
			n++
		}
	}
	return n
}
