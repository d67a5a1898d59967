// The critic and PPO stages together over real NATS JetStream and S3, on a
// batch of real rollouts of the reference model (the critic stage is
// imported here only by this external test package).
package ppo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/critic"
	"github.com/t1pipe/t1/stages/ppo"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trainer"
)

// echoShell answers every command with its script, for machines without
// bubblewrap: the episode's tokens, log-probs and routing are what the
// test needs, not what the commands do.
type echoShell struct{}

func (echoShell) Run(_ context.Context, script string, _ sandbox.RunOptions) (sandbox.Result, error) {
	return sandbox.Result{Stdout: script + "\n"}, nil
}

func shell(t *testing.T) agent.Shell {
	t.Helper()
	bw := &sandbox.Bubblewrap{}
	if err := bw.Available(); err != nil {
		t.Logf("bubblewrap unavailable (%v): commands are echoed", err)
		return echoShell{}
	}
	ctx := context.Background()
	sb, err := bw.Start(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return sh
}

// rollouts plays attempts with the reference model at bf16 and returns
// their rows, with rewards 0, 0.5 and 1 (passed 0, 1, 2 of 2).
func rollouts(t *testing.T, run string, m *moe.Model, tok *moe.Tokenizer, iteration int) batch.Rows {
	t.Helper()
	played.Do(func() { playedRows = play(t, m, tok) })
	if playedRows.Tokens == nil {
		t.Fatal("the rollouts failed in an earlier test")
	}
	// Every test gets its own copy, under its own run.
	var rows batch.Rows
	for _, r := range playedRows.Tokens {
		r.Run, r.Iteration = run, int32(iteration)
		r.TokenIDs, r.LogProbs, r.LossMask = slices.Clone(r.TokenIDs), slices.Clone(r.LogProbs), slices.Clone(r.LossMask)
		rows.Tokens = append(rows.Tokens, r)
	}
	for _, r := range playedRows.Routing {
		r.Run = run
		rows.Routing = append(rows.Routing, r)
	}
	for _, r := range playedRows.Trajectories {
		r.Run, r.Iteration = run, int32(iteration)
		rows.Trajectories = append(rows.Trajectories, r)
	}
	for _, r := range playedRows.Rewards {
		r.Run, r.Iteration = run, int32(iteration)
		rows.Rewards = append(rows.Rewards, r)
	}
	return rows
}

// The episodes are played once per test binary (the model and seeds are
// fixed, so every test would play the same ones).
var (
	played     sync.Once
	playedRows batch.Rows
)

func play(t *testing.T, m *moe.Model, tok *moe.Tokenizer) batch.Rows {
	const run, iteration = "played", 0
	tp, err := moe.NewChat(tok)
	if err != nil {
		t.Fatal(err)
	}
	eng := inference.NewReference(m, tok, moe.BF16, "v0")
	ec := agent.Config{MaxTurns: 1, MaxNewTokens: 24, Context: 512, KeepTurns: 1, Sampling: inference.SamplingParams{Temperature: 1, TopP: 1}}
	var rows batch.Rows
	for a := range 3 {
		ec.Sampling.Seed = uint64(100 + a)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		res, err := agent.Run(ctx, eng, agent.OwnChat(tp), shell(t), "List the files in /app.", ec, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		p := schemas.RolloutRequestedPayload{TaskID: "list-files", Attempt: a, Purpose: schemas.PurposeTrain, Iteration: iteration, Seed: uint64(a)}
		ar, err := agent.AttemptRows(run, p, res, m.Cfg.Experts, "", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rows.Tokens = append(rows.Tokens, ar.Tokens...)
		rows.Routing = append(rows.Routing, ar.Routing...)
		rows.Trajectories = append(rows.Trajectories, ar.Trajectory)
		rows.Rewards = append(rows.Rewards, schemas.RewardRow{Run: run, TaskID: "list-files", Attempt: int32(a), Iteration: int32(iteration),
			Purpose: schemas.PurposeTrain, Passed: int32(a), Total: 2, Scale: 0.5, Reward: 0.5 * float64(a), Source: "junit"})
	}
	return rows
}

type env struct {
	st   store.ObjectStore
	l    *engine.Log
	run  string
	m    *moe.Model
	tok  *moe.Tokenizer
	dims schemas.ModelDims
}

func setup(t *testing.T, run string) *env {
	t.Helper()
	m, err := moe.NewModel(moe.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	c := m.Cfg
	return &env{st: testinfra.Store(t), l: testinfra.Log(t), run: run, m: m, tok: tok,
		dims: schemas.ModelDims{Vocab: c.Vocab, Layers: c.Layers, TopK: c.TopK, Experts: c.Experts}}
}

var runnerCfg = engine.RunnerConfig{Concurrency: 1, AckWait: time.Minute, MaxDeliver: 2, Backoff: []time.Duration{100 * time.Millisecond}}

// options are the reference backend's settings for both stages.
func options() trainer.ReferenceOptions {
	cfg := moe.DefaultConfig()
	cfg.Seed = 2
	return trainer.ReferenceOptions{
		Actor: trainer.ActorOptions{Epochs: 2, Clip: 0.2, Adam: moe.AdamConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, MaxGradNorm: 1, Replay: true},
		Critic: trainer.CriticOptions{Model: cfg, Adam: moe.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8},
			ValueClip: 0.2, Epochs: 2, MaxGradNorm: 1, WarmupSteps: 2, WarmupEV: 0.5},
	}
}

// stages runs the critic stage on criticTrainer and the PPO stage on actorTrainer.
func (e *env) stages(t *testing.T, criticTrainer, actorTrainer trainer.Trainer) {
	t.Helper()
	testinfra.RunStage(t, e.l, critic.New(critic.Config{Store: e.st, Trainer: criticTrainer, GAE: trainer.GAE{Gamma: 1, Lambda: 0.95}}), runnerCfg)
	initial := func(context.Context) (*moe.Checkpoint, error) {
		return &moe.Checkpoint{Model: e.m.Clone(), Tokenizer: e.tok}, nil
	}
	testinfra.RunStage(t, e.l, ppo.New(ppo.Config{Store: e.st, Trainer: actorTrainer, Initial: initial}), runnerCfg)
}

func (e *env) batch(t *testing.T, iteration int, version int64, rows batch.Rows) {
	t.Helper()
	ctx := context.Background()
	for i := range rows.Tokens {
		rows.Tokens[i].Iteration, rows.Tokens[i].PolicyVersion = int32(iteration), version
	}
	m, ref, err := batch.Write(ctx, e.st, e.run, iteration, version, e.dims, rows)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := engine.NewRootEvent(e.run, schemas.BatchReady, fmt.Sprint(iteration), schemas.BatchReadyPayload{
		Iteration: iteration, PolicyVersion: version, Attempts: int(m.Attempts), Tokens: m.Tokens, Manifest: ref})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
}

func (e *env) wait(t *testing.T, typ string, n int) []engine.Event {
	t.Helper()
	testinfra.CheckFor(t, 2*time.Minute, func() error {
		if got := testinfra.Count(t, e.l, "t1."+e.run+"."+typ); got < n {
			var reasons []string
			for _, f := range testinfra.Events(t, e.l, "t1."+e.run+".*.failed") {
				reasons = append(reasons, string(f.Payload))
			}
			if len(reasons) > 0 {
				t.Fatalf("failed: %s", strings.Join(reasons, "; "))
			}
			return fmt.Errorf("%d of %d %s events", got, n, typ)
		}
		return nil
	})
	return testinfra.Events(t, e.l, "t1."+e.run+"."+typ)
}

func TestCriticThenPPO(t *testing.T) {
	ctx := context.Background()
	e := setup(t, "ppo")
	ref := trainer.NewReference(e.st, options())
	e.stages(t, ref, ref)
	rows := rollouts(t, e.run, e.m, e.tok, 0)
	e.batch(t, 0, 0, rows)

	var cu schemas.CriticUpdatedPayload
	if err := e.wait(t, schemas.CriticUpdated, 1)[0].Decode(&cu); err != nil {
		t.Fatal(err)
	}
	if !cu.Warmup || cu.CriticVersion != 1 || len(cu.Values) != 1 || math.IsNaN(cu.ExplainedVariance) || cu.ValueLoss <= 0 {
		t.Fatalf("critic.updated %+v", cu)
	}
	m, err := batch.ReadManifest(ctx, e.st, cu.Manifest)
	if err != nil || len(m.ValueFiles) != 1 {
		t.Fatalf("manifest with values: %v", err)
	}
	vals, err := schemas.ReadRows[schemas.ValueRow](ctx, e.st, cu.Values[0].Key, &cu.Values[0])
	if err != nil || len(vals) != len(rows.Tokens) {
		t.Fatalf("%d value rows for %d chunks: %v", len(vals), len(rows.Tokens), err)
	}
	// The last action of each attempt: return = reward (γ = 1, nothing after it).
	lastRet := map[int32]float32{}
	for _, v := range vals {
		for i := range v.Returns {
			if v.Returns[i] != 0 || v.Advantages[i] != 0 {
				lastRet[v.Attempt] = v.Returns[i]
			}
		}
	}
	if len(lastRet) != 3 || math.Abs(float64(lastRet[2])-1) > 1e-5 || math.Abs(float64(lastRet[0])) > 1e-5 {
		t.Fatalf("returns at the last action: %v", lastRet)
	}
	if _, err := checkpoint.Load(ctx, e.st, cu.Checkpoint.Key); err != nil {
		t.Fatal(err)
	}

	var pu schemas.PolicyUpdatedPayload
	if err := e.wait(t, schemas.PolicyUpdated, 1)[0].Decode(&pu); err != nil {
		t.Fatal(err)
	}
	if pu.PolicyVersion != 1 || pu.PreviousVersion != 0 || pu.Checkpoint.Key != keys.Policy(e.run, 1) || pu.LogProbGap <= 0 {
		t.Fatalf("policy.updated %+v", pu)
	}
	ck, err := checkpoint.Load(ctx, e.st, pu.Checkpoint.Key)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Model.W.Tensor("lm_head.weight").Data[0] == e.m.W.Tensor("lm_head.weight").Data[0] {
		t.Fatal("the new policy equals the old")
	}
	// The attempt that earned the reward became likelier, the one that
	// earned nothing less likely.
	up := func(attempt int32) float64 {
		return meanLogProb(t, ck.Model, rows, attempt) - meanLogProb(t, e.m, rows, attempt)
	}
	if won, lost := up(2), up(0); won <= 0 || lost >= 0 {
		t.Fatalf("mean log-prob of the rewarded attempt moved %+g, of the unrewarded one %+g", won, lost)
	} else {
		t.Logf("mean log-prob: rewarded attempt %+.4f, unrewarded %+.4f", won, lost)
	}
	met, err := schemas.ReadRows[schemas.MetricRow](ctx, e.st, pu.Metrics.Key, &pu.Metrics)
	if err != nil || len(met) != 1 {
		t.Fatalf("metrics: %v", err)
	}
	r := met[0]
	if r.PolicyVersion != 1 || r.Trajectories != 3 || math.Abs(r.RewardMean-0.5) > 1e-9 || math.Abs(r.ResolveRate-1.0/3) > 1e-9 ||
		r.RoutingFlips != 0 || r.LogProbGap != pu.LogProbGap || r.ExplainedVariance != cu.ExplainedVariance {
		t.Fatalf("metrics row %+v", r)
	}
	rc, _, err := e.st.Get(ctx, keys.TrainingReport(e.run, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var rep trainer.TrainingReport
	if b, _ := io.ReadAll(rc); json.Unmarshal(b, &rep) != nil || rep.Event != pu {
		t.Fatalf("training report %+v", rep)
	}
	if rep.Metrics.RoutingMismatches != 0 || rep.Metrics.RoutingSets == 0 || rep.Metrics.LossDrift != 0 || !rep.Metrics.Replay || rep.Metrics.GradNorm <= 0 {
		t.Fatalf("training report %+v", rep.Metrics)
	}
	t.Logf("iteration 0: EV %.3f, value loss %.4f; gap %.5f, clip %.3f, KL %.5f, grad norm %.3f, mismatches %d/%d",
		cu.ExplainedVariance, cu.ValueLoss, rep.Metrics.LogProbGap, rep.Metrics.ClipFraction, rep.Metrics.ApproxKL, rep.Metrics.GradNorm,
		rep.Metrics.RoutingMismatches, rep.Metrics.RoutingSets)

	// The next iteration continues from critic 1 (no warm-up) and policy 1.
	e.batch(t, 1, 1, rows)
	var cu2 schemas.CriticUpdatedPayload
	for _, ev := range e.wait(t, schemas.CriticUpdated, 2) {
		if err := ev.Decode(&cu2); err != nil {
			t.Fatal(err)
		}
		if cu2.Iteration == 1 {
			break
		}
	}
	if cu2.Warmup || cu2.CriticVersion != 2 {
		t.Fatalf("second critic.updated %+v", cu2)
	}
	var pu2 schemas.PolicyUpdatedPayload
	for _, ev := range e.wait(t, schemas.PolicyUpdated, 2) {
		if err := ev.Decode(&pu2); err != nil {
			t.Fatal(err)
		}
		if pu2.Iteration == 1 {
			break
		}
	}
	if pu2.PolicyVersion != 2 || pu2.PreviousVersion != 1 {
		t.Fatalf("second policy.updated %+v", pu2)
	}
}

// Bad input fails the event with the reason, and the previous policy
// stays current.
func TestBadInputFails(t *testing.T) {
	ctx := context.Background()
	e := setup(t, "bad")
	e.stages(t, trainer.NewReference(e.st, options()), &trainer.Exec{Argv: []string{"sh", "-c", "echo trainer crashed >&2; exit 3"}})
	rows := rollouts(t, e.run, e.m, e.tok, 0)
	e.batch(t, 0, 0, rows)
	fails := func(typ string) []engine.Failure {
		var out []engine.Failure
		for _, ev := range testinfra.Events(t, e.l, "t1."+e.run+"."+engine.FailedType(typ)) {
			var f engine.Failure
			if err := ev.Decode(&f); err != nil {
				t.Fatal(err)
			}
			out = append(out, f)
		}
		return out
	}
	testinfra.CheckFor(t, 2*time.Minute, func() error {
		if len(fails(schemas.CriticUpdated)) == 0 {
			return fmt.Errorf("no %s", engine.FailedType(schemas.CriticUpdated))
		}
		return nil
	})
	if f := fails(schemas.CriticUpdated)[0]; f.Stage != "ppo" || !strings.Contains(f.Reason, "status 3") || !strings.Contains(f.Reason, "trainer crashed") {
		t.Fatalf("failure %+v", f)
	}
	if n := testinfra.Count(t, e.l, "t1."+e.run+"."+schemas.PolicyUpdated); n != 0 {
		t.Fatalf("%d policy.updated after a failed update", n)
	}
	if _, err := e.st.Stat(ctx, keys.Policy(e.run, 1)+"/"+moe.WeightsFile); err == nil {
		t.Fatal("a failed update left a new policy")
	}
	if _, err := checkpoint.Load(ctx, e.st, keys.Policy(e.run, 0)); err != nil {
		t.Fatalf("the previous policy is gone: %v", err)
	}

	// Tokens and routing whose counts disagree: the batch never reaches PPO.
	rows.Tokens[0].TokenIDs = append(rows.Tokens[0].TokenIDs, 1)
	rows.Tokens[0].LogProbs = append(rows.Tokens[0].LogProbs, 0)
	rows.Tokens[0].LossMask = append(rows.Tokens[0].LossMask, false)
	e.batch(t, 1, 0, rows)
	testinfra.CheckFor(t, time.Minute, func() error {
		if len(fails(schemas.BatchReady)) == 0 {
			return fmt.Errorf("no %s", engine.FailedType(schemas.BatchReady))
		}
		return nil
	})
	if f := fails(schemas.BatchReady)[0]; f.Stage != "critic" || !strings.Contains(f.Reason, "routes") {
		t.Fatalf("failure %+v", f)
	}
}

// An external trainer does both updates: the critic's (the stand-in
// trains it with the reference backend) and the actor's, whose checkpoint
// it writes to a local directory; the stage checks that it loads and
// stores it as the next version.
func TestExecTrainerStage(t *testing.T) {
	ctx := context.Background()
	e := setup(t, "exec")
	// The stand-in reports a checkpoint it "trained": the initial model
	// with one weight changed, saved to a local directory.
	trained := e.m.Clone()
	trained.W.Tensor("lm_head.weight").Data[0] += 1
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := (&moe.Checkpoint{Model: trained, Tokenizer: e.tok}).SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	ex := &trainer.Exec{Argv: append(testinfra.ExecTrainer(t), "-manifest", "{manifest}", "-checkpoint", dir), Hyperparameters: options(), Store: e.st}
	e.stages(t, ex, ex)
	e.batch(t, 0, 0, rollouts(t, e.run, e.m, e.tok, 0))
	var pu schemas.PolicyUpdatedPayload
	if err := e.wait(t, schemas.PolicyUpdated, 1)[0].Decode(&pu); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Load(ctx, e.st, pu.Checkpoint.Key)
	if err != nil {
		t.Fatal(err)
	}
	if pu.Checkpoint.Key != keys.Policy(e.run, 1) || ck.Model.W.Tensor("lm_head.weight").Data[0] != trained.W.Tensor("lm_head.weight").Data[0] {
		t.Fatalf("policy.updated %+v does not hold the external trainer's checkpoint", pu)
	}

	// critic.updated again (as a replay would deliver it): the update is
	// announced again from its report, without training a second time
	// (which would fail: the external trainer's directory is gone).
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	cu := e.wait(t, schemas.CriticUpdated, 1)[0]
	again, err := engine.NewRootEvent(e.run, schemas.CriticUpdated, "again", json.RawMessage(cu.Payload))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Publish(ctx, again); err != nil {
		t.Fatal(err)
	}
	evs := e.wait(t, schemas.PolicyUpdated, 2)
	var pu2 schemas.PolicyUpdatedPayload
	if err := evs[1].Decode(&pu2); err != nil {
		t.Fatal(err)
	}
	if pu2 != pu {
		t.Fatalf("re-announced %+v, first %+v", pu2, pu)
	}
}

// meanLogProb is the mean log-prob m gives attempt a's actions in rows.
func meanLogProb(t *testing.T, m *moe.Model, rows batch.Rows, a int32) float64 {
	t.Helper()
	var sum float64
	var n int
	for _, r := range rows.Tokens {
		if r.Attempt != a {
			continue
		}
		ids := make([]int, len(r.TokenIDs))
		for i, id := range r.TokenIDs {
			ids[i] = int(id)
		}
		p, err := m.Forward(ids, moe.ForwardOptions{Temperature: float64(r.Temperature)})
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range r.LossMask {
			if l {
				sum += float64(p.LogProbs[i-1])
				n++
			}
		}
	}
	if n == 0 {
		t.Fatalf("attempt %d has no actions", a)
	}
	return sum / float64(n)
}

// A batch whose policy is further from its sampler than
// training.max_staleness allows is refused, never trained.
func TestStaleBatchBeyondTheBoundRefused(t *testing.T) {
	ctx := context.Background()
	e := setup(t, "stale")
	ref := trainer.NewReference(e.st, options())
	e.stages(t, ref, ref) // max_staleness 0
	rows := rollouts(t, e.run, e.m, e.tok, 0)
	m, _, err := batch.Write(ctx, e.st, e.run, 0, 0, e.dims, rows)
	if err != nil {
		t.Fatal(err)
	}
	m.Staleness = 1
	mref, err := schemas.WriteManifest(ctx, e.st, m)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := engine.NewRootEvent(e.run, schemas.BatchReady, "0", schemas.BatchReadyPayload{
		Iteration: 0, PolicyVersion: 0, Attempts: int(m.Attempts), Tokens: m.Tokens, Manifest: mref})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	var f engine.Failure
	testinfra.CheckFor(t, 2*time.Minute, func() error {
		evs := testinfra.Events(t, e.l, "t1."+e.run+"."+engine.FailedType(schemas.CriticUpdated))
		if len(evs) == 0 {
			return fmt.Errorf("no %s", engine.FailedType(schemas.CriticUpdated))
		}
		return evs[0].Decode(&f)
	})
	if f.Stage != "ppo" || !strings.Contains(f.Reason, "would train policy 1, 1 versions newer, above training.max_staleness 0") {
		t.Fatalf("failure %+v", f)
	}
	if n := testinfra.Count(t, e.l, "t1."+e.run+"."+schemas.PolicyUpdated); n != 0 {
		t.Fatalf("%d policy.updated for a batch beyond the bound", n)
	}
}
