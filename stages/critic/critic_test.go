package critic

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trainer"
	"github.com/t1pipe/t1/update"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// sampled stores four single-chunk attempts sampled from a fresh default model at
// bf16, with rewards 0, 1, 2, 3.
func sampled(t *testing.T, st store.ObjectStore, run string) *schemas.BatchManifest {
	t.Helper()
	m, err := moe.NewModel(moe.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := moe.NewSampler(m, moe.BF16)
	rng := rand.New(rand.NewPCG(5, 6))
	var rows batch.Rows
	for a := range 4 {
		prompt := []int{256}
		for range 8 {
			prompt = append(prompt, 32+rng.IntN(200))
		}
		g, err := s.Generate(context.Background(), prompt, moe.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 16, Seed: uint64(a)})
		if err != nil {
			t.Fatal(err)
		}
		ids := append(prompt, g.OutputIDs...)
		tr := schemas.TokenRow{Run: run, TaskID: "t", Attempt: int32(a), LossMask: make([]bool, len(ids)), LogProbs: make([]float32, len(ids))}
		for i, id := range ids {
			tr.TokenIDs = append(tr.TokenIDs, int32(id))
			if i >= len(prompt) {
				tr.LossMask[i], tr.LogProbs[i] = true, g.LogProbs[i-len(prompt)]
			}
		}
		rec, _ := routing.NewRecord(len(ids), m.Cfg.Layers, m.Cfg.TopK, m.Cfg.Experts)
		for i := range ids {
			for l := range m.Cfg.Layers {
				set := g.Routing.At(min(i, g.Routing.Tokens-1), l)
				if err := rec.Set(i, l, []int{int(set[0]), int(set[1])}); err != nil {
					t.Fatal(err)
				}
			}
		}
		rr, err := schemas.NewRoutingRow(run, "t", a, 0, rec, routing.Packed)
		if err != nil {
			t.Fatal(err)
		}
		rows.Tokens = append(rows.Tokens, tr)
		rows.Routing = append(rows.Routing, rr)
		rows.Rewards = append(rows.Rewards, schemas.RewardRow{Run: run, TaskID: "t", Attempt: int32(a), Reward: float64(a)})
		rows.Trajectories = append(rows.Trajectories, schemas.TrajectoryRow{Run: run, TaskID: "t", Attempt: int32(a)})
	}
	dims := schemas.ModelDims{Vocab: 512, Layers: m.Cfg.Layers, TopK: m.Cfg.TopK, Experts: m.Cfg.Experts}
	man, _, err := batch.Write(context.Background(), st, run, 0, 0, dims, rows)
	if err != nil {
		t.Fatal(err)
	}
	return man
}

// input is the batch of m as the stage hands it to Iterate: a run of no
// branches.
func input(m *schemas.BatchManifest) *update.Input {
	return &update.Input{Manifest: m, Runs: []string{m.Run}}
}

// options are the reference critic's: a fresh critic of the default
// shape warms up for at most warmup steps, until the explained variance
// reaches ev.
func options(warmup int, ev float64) trainer.ReferenceOptions {
	cfg := moe.DefaultConfig()
	cfg.Seed = 2
	adam := moe.DefaultAdam()
	adam.LR = 2e-3
	return trainer.ReferenceOptions{Critic: trainer.CriticOptions{Model: cfg, Adam: adam, Epochs: 1, MaxGradNorm: 1, WarmupSteps: warmup, WarmupEV: ev}, Log: discard()}
}

func newStage(st store.ObjectStore, tr trainer.Trainer) *stage {
	return &stage{cfg: Config{Store: st, Trainer: tr, GAE: trainer.GAE{Gamma: 1, Lambda: 1}, Log: discard()}}
}

func reference(st store.ObjectStore, warmup int, ev float64) *stage {
	return newStage(st, trainer.NewReference(st, options(warmup, ev)))
}

// Warm-up makes the values handed to the actor explain the returns far
// better than a cold critic's; with γ = λ = 1 every return is the
// attempt's reward.
func TestWarmup(t *testing.T) {
	ctx := context.Background()
	cold := reference(testinfra.Store(t), 0, 0)
	man := sampled(t, cold.cfg.Store, "cold")
	c, err := cold.Iterate(ctx, input(man))
	if err != nil {
		t.Fatal(err)
	}
	warm := reference(testinfra.Store(t), 40, 0.9)
	wman := sampled(t, warm.cfg.Store, "warm")
	w, err := warm.Iterate(ctx, input(wman))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("explained variance: cold %.3f, after warm-up %.3f", c.ExplainedVariance, w.ExplainedVariance)
	if c.Warmup || !w.Warmup || w.ExplainedVariance <= c.ExplainedVariance || w.ExplainedVariance < 0 {
		t.Fatalf("cold %+v\nwarm %+v", c, w)
	}
	vals, err := schemas.ReadRows[schemas.ValueRow](ctx, warm.cfg.Store, w.Values[0].Key, &w.Values[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		for i, g := range v.Returns {
			if (g != 0 || v.Values[i] != 0) && g != float32(v.Attempt) {
				t.Fatalf("attempt %d token %d: return %v", v.Attempt, i, g)
			}
			if d := v.Advantages[i] - (v.Returns[i] - v.Values[i]); math.Abs(float64(d)) > 1e-5 {
				t.Fatalf("advantage %v ≠ return − value", v.Advantages[i])
			}
		}
	}
	// The saved critic is version 1 and loads.
	if w.CriticVersion != 1 {
		t.Fatalf("critic version %d", w.CriticVersion)
	}
	if _, err := checkpoint.Load(ctx, warm.cfg.Store, w.Checkpoint.Key); err != nil {
		t.Fatal(err)
	}
	// Deterministic: the same batch gives the same values object.
	again, err := reference(warm.cfg.Store, 40, 0.9).Iterate(ctx, input(wman))
	if err != nil {
		t.Fatal(err)
	}
	if again.Values[0] != w.Values[0] || again.Checkpoint != w.Checkpoint {
		t.Fatal("a repeated iteration wrote different objects")
	}
}

// An external trainer trains the critic through the stage: the stand-in
// does what the reference backend does, through the exec protocol, and
// the stage stores and announces exactly the same objects.
func TestExecTrainerTrainsTheCritic(t *testing.T) {
	ctx := context.Background()
	var got []*schemas.CriticUpdatedPayload
	for _, name := range []string{"reference", "exec"} {
		t.Run(name, func(t *testing.T) {
			st := testinfra.Store(t)
			s := reference(st, 3, 0.9)
			if name == "exec" {
				s = newStage(st, &trainer.Exec{Argv: testinfra.ExecTrainer(t), Hyperparameters: options(3, 0.9), Store: st})
			}
			p, err := s.Iterate(ctx, input(sampled(t, st, "c")))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p)
		})
	}
	if len(got) != 2 {
		return // a subtest failed
	}
	if !reflect.DeepEqual(got[0], got[1]) || !got[0].Warmup {
		t.Fatalf("reference and exec trainers announced\n%+v\n%+v", got[0], got[1])
	}
}
