package trainer

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// withAdvantages sets every action's advantage to adv(attempt).
func withAdvantages(vals []schemas.ValueRow, adv func(attempt int32) float32) {
	for i := range vals {
		for t, a := range vals[i].Advantages {
			if a != 0 {
				vals[i].Advantages[t] = adv(vals[i].Attempt)
			}
		}
	}
}

// meanLogProb is the mean log-prob m gives attempt a's actions.
func meanLogProb(t *testing.T, ctx context.Context, m *moe.Model, b *batch.Batch, a int32) float64 {
	t.Helper()
	var sum float64
	var n int
	for _, c := range b.Chunks() {
		if c.Tokens.Attempt != a {
			continue
		}
		p, err := m.Forward(c.IDs(), moe.ForwardOptions{Temperature: float64(c.Tokens.Temperature)})
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range c.Tokens.LossMask {
			if l {
				sum += float64(p.LogProbs[i-1])
				n++
			}
		}
	}
	return sum / float64(n)
}

// rewardedBatch samples a batch from a fresh policy m, whose attempt 0
// earned more than expected (advantage 1), attempt 1 less (−1) and
// attempt 2 what was expected (0).
func rewardedBatch(t *testing.T, st store.ObjectStore) (*moe.Model, *schemas.BatchManifest, *batch.Batch) {
	t.Helper()
	ctx := context.Background()
	m := policy(t, st)
	man, vals := sampled(t, st, m)
	withAdvantages(vals, func(a int32) float32 { return []float32{1, -1, 0}[a] })
	man, _, _, err := batch.WithValues(ctx, st, man, vals)
	if err != nil {
		t.Fatal(err)
	}
	b, err := batch.Load(ctx, st, man)
	if err != nil {
		t.Fatal(err)
	}
	return m, man, b
}

func adam(lr float64) moe.AdamConfig {
	return moe.AdamConfig{LR: lr, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}
}

// PPO raises the probability of what earned more than expected and lowers
// that of what earned less; minibatches and epochs take several steps,
// and a large learning rate moves the ratio past the clip.
func TestPPOMovesTowardRewardedActions(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	m, man, b := rewardedBatch(t, st)
	for _, c := range []struct {
		name             string
		lr               float64
		epochs, mb       int
		steps            int
		clipped, normAdv bool
		weigh            bool
	}{
		{"small steps", 1e-4, 2, 2, 4, false, false, false},
		{"attempts weighed", 1e-4, 2, 2, 4, false, true, true},
		{"large steps", 2e-2, 4, 4, 16, true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := NewReference(st, ReferenceOptions{Actor: ActorOptions{Epochs: c.epochs, Minibatches: c.mb, Clip: 0.2, Adam: adam(c.lr),
				MaxGradNorm: 1, Replay: true, NormalizeAdvantages: c.normAdv, WeighAttempts: c.weigh}})
			res, err := tr.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 1), Version: 1})
			if err != nil {
				t.Fatal(err)
			}
			met := res.Metrics
			// Three attempts of four chunks: at most as many minibatches
			// as chunks.
			if met.Steps != c.epochs*min(c.mb, 4) || met.Skipped != "" {
				t.Fatalf("steps %d (want %d), skipped %q", met.Steps, c.epochs*min(c.mb, 4), met.Skipped)
			}
			if (met.ClipFraction > 0) != c.clipped {
				t.Fatalf("clip fraction %g, want clipping %v", met.ClipFraction, c.clipped)
			}
			ck, err := checkpoint.Load(ctx, st, res.Checkpoint)
			if err != nil {
				t.Fatal(err)
			}
			up0, up1 := meanLogProb(t, ctx, ck.Model, b, 0)-meanLogProb(t, ctx, m, b, 0), meanLogProb(t, ctx, ck.Model, b, 1)-meanLogProb(t, ctx, m, b, 1)
			t.Logf("rewarded attempt %+.4f, unrewarded %+.4f, clip fraction %.3f, KL %.4f, routing live %.4f, experts switched %.4f",
				up0, up1, met.ClipFraction, met.ApproxKL, met.LiveKL, met.ExpertsSwitched)
			// Measured again with each policy routing on its own, the
			// update changed the policy too.
			if met.LiveKL <= 0 || met.ExpertsSwitched < 0 || met.ExpertsSwitched > 1 {
				t.Fatalf("KL routing live %g, experts switched %g", met.LiveKL, met.ExpertsSwitched)
			}
			if up0 <= 0 || up1 >= 0 {
				t.Fatalf("log-prob of the rewarded attempt moved %+g, of the unrewarded one %+g", up0, up1)
			}
		})
	}
}

// Without a non-zero advantage there is nothing to learn: no step is
// taken and the new version's tensors are the old ones.
func TestPPOSkipsABatchWithoutSignal(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	m := policy(t, st)
	man, vals := sampled(t, st, m)
	for i := range vals {
		clear(vals[i].Advantages)
	}
	man, _, _, err := batch.WithValues(ctx, st, man, vals)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewReference(st, ReferenceOptions{Actor: ActorOptions{Epochs: 2, Minibatches: 2, Adam: adam(1e-3), Replay: true, NormalizeAdvantages: true}})
	res, err := tr.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 1), Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Metrics.Steps != 0 || res.Metrics.Skipped == "" || res.Metrics.LiveKL != 0 || res.Metrics.ExpertsSwitched != 0 {
		t.Fatalf("metrics %+v, want a skipped update", res.Metrics)
	}
	ck, err := checkpoint.Load(ctx, st, res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"lm_head.weight", "model.embed_tokens.weight"} {
		a, b := m.W.Tensor(name).Data, ck.Model.W.Tensor(name).Data
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s[%d] changed: %g → %g", name, i, a[i], b[i])
			}
		}
	}
}

// The trust region on the policy as sampled halves a step that moves it
// too far until it does not, keeping its direction, and takes no step at
// all when even 1/32 of it would.
func TestPPOTrustRegionScalesBackTheStep(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	m, man, b := rewardedBatch(t, st)
	// Every update is version 1's, which seeds its minibatches' order.
	train := func(bound float64, out int64) (ActorMetrics, *moe.Checkpoint) {
		t.Helper()
		tr := NewReference(st, ReferenceOptions{Actor: ActorOptions{Epochs: 4, Minibatches: 4, Clip: 0.2, Adam: adam(2e-2),
			MaxGradNorm: 1, Replay: true, NormalizeAdvantages: true, MaxLiveKL: bound}})
		res, err := tr.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Policy(run, out), Version: 1})
		if err != nil {
			t.Fatal(err)
		}
		ck, err := checkpoint.Load(ctx, st, res.Checkpoint)
		if err != nil {
			t.Fatal(err)
		}
		return res.Metrics, ck
	}
	start, err := checkpoint.Load(ctx, st, keys.Policy(run, 0))
	if err != nil {
		t.Fatal(err)
	}
	full, _ := train(0, 1)
	bound := full.LiveKL / 8
	met, ck := train(bound, 2)
	scaled := ck.Model
	up0, up1 := meanLogProb(t, ctx, scaled, b, 0)-meanLogProb(t, ctx, m, b, 0), meanLogProb(t, ctx, scaled, b, 1)-meanLogProb(t, ctx, m, b, 1)
	t.Logf("full step: KL routing live %.4f, experts switched %.3f; bound %.4f: %d halvings, KL %.4f, experts switched %.3f, rewarded %+.4f, unrewarded %+.4f",
		full.LiveKL, full.ExpertsSwitched, bound, met.Backtracks, met.LiveKL, met.ExpertsSwitched, up0, up1)
	if full.Backtracks != 0 || met.Backtracks == 0 || met.LiveKL > bound || met.LiveKL <= 0 || met.Skipped != "" {
		t.Fatalf("full step %+v; bounded step %+v", full, met)
	}
	if met.ApproxKL != full.ApproxKL {
		t.Fatalf("the bounded update took other steps: approximate KL %g, full %g", met.ApproxKL, full.ApproxKL)
	}
	if up0 <= 0 || up1 >= 0 {
		t.Fatalf("the scaled step moved the rewarded attempt's log-prob %+g, the unrewarded one's %+g", up0, up1)
	}

	met, kept := train(1e-12, 3)
	if met.Skipped == "" || met.Backtracks != maxBacktracks {
		t.Fatalf("a bound no step meets: %+v", met)
	}
	for i, tn := range m.W.Tensors {
		if !slices.Equal(tn.Data, kept.Model.W.Tensors[i].Data) {
			t.Fatalf("%s changed although the step was rejected", tn.Name)
		}
	}
	// The optimiser too (moe.TestAdamMarkRestores): the next update steps
	// from the state it would have had if this one had never run.
	steps := 0
	if start.Optimizer != nil {
		steps = start.Optimizer.Steps()
	}
	if kept.Optimizer == nil || kept.Optimizer.Steps() != steps {
		t.Fatalf("the rejected step left the optimiser at %v steps, from %d", kept.Optimizer, steps)
	}
}

// A step whose loss stops being a number fails the update: no checkpoint
// is written, the policy it started from stays.
func TestPPODivergentUpdateFails(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	m := policy(t, st)
	man, vals := sampled(t, st, m)
	withAdvantages(vals, func(int32) float32 { return float32(math.Inf(1)) })
	man, _, _, err := batch.WithValues(ctx, st, man, vals)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewReference(st, ReferenceOptions{Actor: ActorOptions{Adam: adam(1e-3), Replay: true}})
	_, err = tr.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 1), Version: 1})
	if !errors.Is(err, ErrDivergent) || !batch.IsBad(err) {
		t.Fatalf("an infinite loss: %v, want ErrDivergent as bad input", err)
	}
	if _, err := st.Stat(ctx, keys.Policy(run, 1)+"/"+moe.WeightsFile); err == nil {
		t.Fatal("a divergent update wrote a checkpoint")
	}
}

// When every attempt earned the same, the returns carry nothing a critic
// could learn for the update: warm-up ends at once and says why; when the
// rewards vary it runs.
func TestCriticWarmupEndsWithoutRewardVariance(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		same  bool
		steps int
		end   string
	}{{"same rewards", true, 0, WarmupNoVariance}, {"varied rewards", false, 3, WarmupSteps}} {
		t.Run(c.name, func(t *testing.T) {
			st := testinfra.Store(t)
			m := policy(t, st)
			rows, _ := sampledRows(t, m, moe.BF16, 1, 1)
			if c.same {
				for i := range rows.Rewards {
					rows.Rewards[i].Reward = 1
				}
			}
			man := writeSampled(t, st, m, rows)
			cm := moe.DefaultConfig()
			tr := NewReference(st, ReferenceOptions{Critic: CriticOptions{Model: cm, Adam: adam(5e-4), WarmupSteps: 3, WarmupEV: 0.99}})
			res, err := tr.TrainCritic(ctx, CriticJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Critic(run, 1), Version: 1, GAE: GAE{Gamma: 1, Lambda: 0.95}})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Metrics; got.WarmupSteps != c.steps || got.WarmupEnd != c.end || !got.Warmup {
				t.Fatalf("warm-up %+v, want %d steps ended by %q", got, c.steps, c.end)
			}
		})
	}
}

// With the group baseline every action of an attempt gets the attempt's
// reward minus the mean of its task's attempts, whatever the critic says,
// while the critic's returns stay GAE's.
func TestGroupBaselineAdvantages(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	m := policy(t, st)
	rows, _ := sampledRows(t, m, moe.BF16, 1, 1) // one task, rewards 0, 1, 2
	man := writeSampled(t, st, m, rows)
	tr := NewReference(st, ReferenceOptions{Critic: CriticOptions{Model: moe.DefaultConfig(), Adam: adam(5e-4), Epochs: 1}})
	for _, c := range []struct {
		baseline string
		group    bool
	}{{BaselineGroup, true}, {BaselineCritic, false}} {
		res, err := tr.TrainCritic(ctx, CriticJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Critic(run, 1) + "-" + c.baseline, Version: 1,
			GAE: GAE{Gamma: 1, Lambda: 0.95, Baseline: c.baseline}})
		if err != nil {
			t.Fatal(err)
		}
		actions := 0
		for _, v := range res.Values {
			want := float32(v.Attempt) - 1
			for i, a := range v.Advantages {
				if v.Returns[i] == 0 {
					continue // not an action
				}
				actions++
				if (a == want) != c.group {
					t.Fatalf("%s baseline: attempt %d token %d has advantage %g (group value %g)", c.baseline, v.Attempt, i, a, want)
				}
			}
		}
		if actions == 0 {
			t.Fatal("no action was checked")
		}
	}
}
