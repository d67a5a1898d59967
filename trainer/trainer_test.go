package trainer

import (
	"bytes"
	"context"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
)

const run = "tr"

// sampled builds a batch by sampling the model at bf16: three attempts,
// the first of two chunks, with random advantages standing in for the
// critic's.
func sampled(t *testing.T, st store.ObjectStore, m *moe.Model) (*schemas.BatchManifest, []schemas.ValueRow) {
	t.Helper()
	return sampledAt(t, st, m, moe.BF16, 1, 1)
}

// sampledAt samples at prec and temperature temp, and records recorded as
// the tokens' temperature.
func sampledAt(t *testing.T, st store.ObjectStore, m *moe.Model, prec moe.Precision, temp, recorded float64) (*schemas.BatchManifest, []schemas.ValueRow) {
	t.Helper()
	rows, vals := sampledRows(t, m, prec, temp, recorded)
	return writeSampled(t, st, m, rows), vals
}

func writeSampled(t *testing.T, st store.ObjectStore, m *moe.Model, rows batch.Rows) *schemas.BatchManifest {
	t.Helper()
	dims := schemas.ModelDims{Vocab: m.Cfg.Vocab, Layers: m.Cfg.Layers, TopK: m.Cfg.TopK, Experts: m.Cfg.Experts}
	man, _, err := batch.Write(context.Background(), st, run, 0, 0, dims, rows)
	if err != nil {
		t.Fatal(err)
	}
	return man
}

// sampledRows are sampledAt's rows before they are stored.
func sampledRows(t *testing.T, m *moe.Model, prec moe.Precision, temp, recorded float64) (batch.Rows, []schemas.ValueRow) {
	t.Helper()
	ctx := context.Background()
	s := moe.NewSampler(m, prec)
	rng := rand.New(rand.NewPCG(7, 8))
	var rows batch.Rows
	var vals []schemas.ValueRow
	for a := range 3 {
		chunks := 1
		if a == 0 {
			chunks = 2
		}
		for c := range chunks {
			prompt := []int{256}
			for range 6 + c {
				prompt = append(prompt, 32+rng.IntN(200))
			}
			// The token rows keep the temperature as float32, which is what
			// the trainer reads back: sample at that value, so that the
			// exact comparisons compare one distribution.
			g, err := s.Generate(ctx, prompt, moe.SamplingParams{Temperature: float64(float32(temp)), TopP: 1, MaxNewTokens: 20, Seed: uint64(10*a + c)})
			if err != nil {
				t.Fatal(err)
			}
			ids := append(append([]int(nil), prompt...), g.OutputIDs...)
			tr := schemas.TokenRow{Run: run, TaskID: "task", Attempt: int32(a), Chunk: int32(c), LossMask: make([]bool, len(ids)), LogProbs: make([]float32, len(ids)),
				Temperature: float32(recorded), TopP: 1}
			for _, id := range ids {
				tr.TokenIDs = append(tr.TokenIDs, int32(id))
			}
			vr := schemas.ValueRow{Run: run, TaskID: "task", Attempt: int32(a), Chunk: int32(c),
				Values: make([]float32, len(ids)), Advantages: make([]float32, len(ids)), Returns: make([]float32, len(ids))}
			for j := range g.OutputIDs {
				tr.LossMask[len(prompt)+j] = true
				tr.LogProbs[len(prompt)+j] = g.LogProbs[j]
				vr.Advantages[len(prompt)+j] = float32(rng.NormFloat64())
			}
			rows.Tokens = append(rows.Tokens, tr)
			rec, err := routing.NewRecord(len(ids), m.Cfg.Layers, m.Cfg.TopK, m.Cfg.Experts)
			if err != nil {
				t.Fatal(err)
			}
			for tok := range len(ids) {
				for l := range m.Cfg.Layers {
					set := g.Routing.At(min(tok, g.Routing.Tokens-1), l)
					if err := rec.Set(tok, l, []int{int(set[0]), int(set[1])}); err != nil {
						t.Fatal(err)
					}
				}
			}
			rr, err := schemas.NewRoutingRow(run, "task", a, c, rec, routing.Auto)
			if err != nil {
				t.Fatal(err)
			}
			rows.Routing = append(rows.Routing, rr)
			vals = append(vals, vr)
		}
		rows.Rewards = append(rows.Rewards, schemas.RewardRow{Run: run, TaskID: "task", Attempt: int32(a), Passed: int32(a), Total: 2, Reward: float64(a)})
		rows.Trajectories = append(rows.Trajectories, schemas.TrajectoryRow{Run: run, TaskID: "task", Attempt: int32(a), Chunks: int32(chunks)})
	}
	return rows, vals
}

func policy(t *testing.T, st store.ObjectStore) *moe.Model {
	t.Helper()
	m, err := moe.NewModel(moe.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if err := (&moe.Checkpoint{Model: m, Tokenizer: tok}).Save(context.Background(), st, keys.Policy(run, 0)); err != nil {
		t.Fatal(err)
	}
	return m
}

// Tokens sampled at a temperature train at it: at equal precision with
// replay on, the trainer's log-probs are the sampler's exactly; read as
// untempered they are those of another distribution.
func TestTrainerUsesTheSamplingTemperature(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		recorded float64
		exact    bool
	}{{"recorded", 0.6, true}, {"ignored", 0, false}} {
		t.Run(c.name, func(t *testing.T) {
			st := testinfra.Store(t)
			m := policy(t, st)
			man, vals := sampledAt(t, st, m, moe.F32, 0.6, c.recorded)
			man, _, _, err := batch.WithValues(ctx, st, man, vals)
			if err != nil {
				t.Fatal(err)
			}
			tr := NewReference(st, ReferenceOptions{Actor: ActorOptions{Epochs: 1, Clip: 0.2, Adam: moe.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, MaxGradNorm: 1, Replay: true}})
			res, err := tr.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 1), Version: 1})
			if err != nil {
				t.Fatal(err)
			}
			gap := res.Metrics.LogProbGap
			t.Logf("log-prob gap %.3g (largest %.3g)", gap, res.Metrics.LogProbGapMax)
			if c.exact && res.Metrics.LogProbGapMax != 0 {
				t.Fatalf("tempered tokens trained at their temperature: gap %g, largest %g, want 0", gap, res.Metrics.LogProbGapMax)
			}
			if !c.exact && gap < 0.05 {
				t.Fatalf("tempered tokens read as untempered: gap %g, want a visible one", gap)
			}
		})
	}
}

func TestReferenceTrainer(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	m := policy(t, st)
	man, vals := sampled(t, st, m)
	man, _, _, err := batch.WithValues(ctx, st, man, vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, replay := range []bool{true, false} {
		out := keys.Policy(run, 1)
		if !replay {
			out = keys.Policy(run, 2)
		}
		tr := NewReference(st, ReferenceOptions{Actor: ActorOptions{Epochs: 2, Clip: 0.2, Adam: moe.AdamConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, MaxGradNorm: 1, Replay: replay}})
		res, err := tr.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: out, Version: 1})
		if err != nil {
			t.Fatal(err)
		}
		met := res.Metrics
		t.Logf("replay %v: %+v", replay, met)
		if met.Steps != 2 || met.LossDrift != 0 || met.RoutingSets == 0 || met.LogProbGap <= 0 || met.GradNorm <= 0 || met.ApproxKL <= 0 {
			t.Fatalf("metrics %+v", met)
		}
		if replay && met.RoutingMismatches != 0 {
			t.Fatalf("replay on: %d routing mismatches", met.RoutingMismatches)
		}
		ck, err := checkpoint.Load(ctx, st, res.Checkpoint)
		if err != nil {
			t.Fatal(err)
		}
		if ck.Meta["policy_version"] != "1" || ck.Optimizer == nil || ck.Optimizer.Steps() != 2 {
			t.Fatalf("checkpoint meta %v", ck.Meta)
		}
		if ck.Model.W.Tensor("lm_head.weight").Data[0] == m.W.Tensor("lm_head.weight").Data[0] {
			t.Fatal("the update changed nothing")
		}
	}
	// The current policy is untouched.
	cur, err := checkpoint.Load(ctx, st, keys.Policy(run, 0))
	if err != nil {
		t.Fatal(err)
	}
	if cur.Model.W.Tensor("lm_head.weight").Data[0] != m.W.Tensor("lm_head.weight").Data[0] {
		t.Fatal("training wrote over the current policy")
	}
	// A checkpoint that does not exist is bad input.
	tr := NewReference(st, ReferenceOptions{Actor: ActorOptions{Replay: true}})
	if _, err := tr.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 99), Out: keys.Policy(run, 9), Version: 9}); !batch.IsBad(err) {
		t.Fatalf("missing checkpoint: %v", err)
	}
	// Nor does one whose weights are garbage.
	junk := []byte("not safetensors")
	if _, err := st.Put(ctx, keys.Policy(run, 7)+"/"+moe.ConfigFile, bytes.NewReader(junk), int64(len(junk)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, keys.Policy(run, 7)+"/"+moe.WeightsFile, bytes.NewReader(junk), int64(len(junk)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = tr.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 7), Out: keys.Policy(run, 8), Version: 8})
	if !batch.IsBad(err) || !strings.Contains(err.Error(), "does not load") {
		t.Fatalf("corrupt checkpoint: %v", err)
	}
	if _, err := st.Stat(ctx, keys.Policy(run, 8)+"/"+moe.WeightsFile); err == nil {
		t.Fatal("a failed update wrote a checkpoint")
	}
}

func TestExecTrainer(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	m := policy(t, st)
	man, _ := sampled(t, st, m)
	argv := testinfra.ExecTrainer(t)
	e := &Exec{Argv: append(argv, "-manifest", "{manifest}", "-checkpoint", "{checkpoint}")}
	res, err := e.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 1), Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Checkpoint != keys.Policy(run, 1) || res.Metrics.Actions != man.Tokens || res.Metrics.Steps != 1 || !res.Metrics.Replay {
		t.Fatalf("result %+v", res)
	}
	fail := &Exec{Argv: []string{argv[0], "-exit", "7"}}
	_, err = fail.TrainActor(ctx, ActorJob{Manifest: man, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 1), Version: 1})
	if !batch.IsBad(err) || !strings.Contains(err.Error(), "status 7") || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("failing trainer: %v", err)
	}
	silent := &Exec{Argv: []string{"true"}}
	if _, err := silent.TrainActor(ctx, ActorJob{Manifest: man}); !batch.IsBad(err) || !strings.Contains(err.Error(), "no result file") {
		t.Fatalf("trainer without a result: %v", err)
	}
	// An actor-only trainer handed a critic job answers with an actor
	// result, which is refused.
	actorOnly := &Exec{Argv: []string{"sh", "-c", `printf '{"checkpoint": "%s"}' "$1" > "$0"`, "{out}", "{checkpoint}"}}
	_, err = actorOnly.TrainCritic(ctx, CriticJob{Manifest: man, Critic: keys.Critic(run, 0), Out: keys.Critic(run, 1), Version: 1, GAE: GAE{Gamma: 1, Lambda: 1}})
	if !batch.IsBad(err) || !strings.Contains(err.Error(), `answers a job of kind "", not "critic"`) {
		t.Fatalf("actor result to a critic job: %v", err)
	}
}

// The exec protocol loses nothing: an external trainer doing what the
// reference backend does, through job and result files, reports the same
// values and metrics and a checkpoint with the same bytes.
func TestExecTrainerMatchesReference(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	m := policy(t, st)
	man, vals := sampled(t, st, m)
	b, err := batch.Load(ctx, st, man)
	if err != nil {
		t.Fatal(err)
	}
	cm := moe.DefaultConfig()
	cm.Seed = 2
	opt := ReferenceOptions{Critic: CriticOptions{Model: cm, ValueClip: 0.2, MaxGradNorm: 1, WarmupSteps: 2, WarmupEV: 0.9},
		SFT: SFTOptions{MaxGradNorm: 1, Batch: 2}}
	ref := NewReference(st, opt)
	ex := &Exec{Argv: testinfra.ExecTrainer(t), Hyperparameters: opt, Store: st}
	same := func(what, a, b string) {
		t.Helper()
		ra, err := checkpoint.Ref(ctx, st, a)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkpoint.Adopt(ctx, st, b, b+"-adopted", nil); err != nil {
			t.Fatal(err)
		}
		rb, err := checkpoint.Ref(ctx, st, b+"-adopted")
		if err != nil {
			t.Fatal(err)
		}
		if ra.Bytes != rb.Bytes || ra.SHA256 != rb.SHA256 {
			t.Fatalf("%s checkpoints differ: %+v vs %+v", what, ra, rb)
		}
	}

	job := CriticJob{Manifest: man, Batch: b, Out: keys.Critic(run, 1), Version: 1, GAE: GAE{Gamma: 1, Lambda: 0.95}}
	want, err := ref.TrainCritic(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	job.Batch, job.Out = nil, keys.Critic(run, 1)+"-exec"
	got, err := ex.TrainCritic(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if got.Metrics != want.Metrics || !want.Metrics.Warmup || !reflect.DeepEqual(got.Values, want.Values) {
		t.Fatalf("exec critic %+v, reference %+v", got.Metrics, want.Metrics)
	}
	if _, err := batch.ValueRows(b, got.Values, 0); err != nil {
		t.Fatal(err)
	}
	same("critic", want.Checkpoint, got.Checkpoint)
	// The next iteration starts from the stored critic, without warm-up.
	job = CriticJob{Manifest: man, Batch: b, Critic: want.Checkpoint, Out: keys.Critic(run, 2), Version: 2, GAE: job.GAE}
	if want, err = ref.TrainCritic(ctx, job); err != nil {
		t.Fatal(err)
	}
	job.Batch, job.Out = nil, keys.Critic(run, 2)+"-exec"
	if got, err = ex.TrainCritic(ctx, job); err != nil {
		t.Fatal(err)
	}
	if got.Metrics != want.Metrics || want.Metrics.Warmup || !reflect.DeepEqual(got.Values, want.Values) {
		t.Fatalf("exec critic %+v, reference %+v", got.Metrics, want.Metrics)
	}
	same("second critic", want.Checkpoint, got.Checkpoint)

	sj := SFTJob{Run: run, Data: man.TokenFiles, Steps: 2, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 1), Version: 1}
	wantS, err := ref.TrainSFT(ctx, sj)
	if err != nil {
		t.Fatal(err)
	}
	sj.Out = keys.Policy(run, 1) + "-exec"
	gotS, err := ex.TrainSFT(ctx, sj)
	if err != nil {
		t.Fatal(err)
	}
	if gotS.Metrics != wantS.Metrics || wantS.Metrics.Steps != 2 || wantS.Metrics.Sequences == 0 {
		t.Fatalf("exec sft %+v, reference %+v", gotS.Metrics, wantS.Metrics)
	}
	same("sft", wantS.Checkpoint, gotS.Checkpoint)
	// A seeded order reaches the external trainer too.
	sj.Seed, sj.Steps, sj.Out = 9, 6, keys.Policy(run, 1)+"-seeded"
	if wantS, err = ref.TrainSFT(ctx, sj); err != nil {
		t.Fatal(err)
	}
	sj.Out = keys.Policy(run, 1) + "-seeded-exec"
	if gotS, err = ex.TrainSFT(ctx, sj); err != nil {
		t.Fatal(err)
	}
	if gotS.Metrics != wantS.Metrics {
		t.Fatalf("exec seeded sft %+v, reference %+v", gotS.Metrics, wantS.Metrics)
	}
	same("seeded sft", wantS.Checkpoint, gotS.Checkpoint)

	withVals, _, _, err := batch.WithValues(ctx, st, man, vals)
	if err != nil {
		t.Fatal(err)
	}
	aj := ActorJob{Manifest: withVals, Policy: keys.Policy(run, 0), Out: keys.Policy(run, 2), Version: 2}
	wantA, err := ref.TrainActor(ctx, aj)
	if err != nil {
		t.Fatal(err)
	}
	aj.Out = keys.Policy(run, 2) + "-exec"
	gotA, err := ex.TrainActor(ctx, aj)
	if err != nil {
		t.Fatal(err)
	}
	if gotA.Metrics != wantA.Metrics {
		t.Fatalf("exec actor %+v, reference %+v", gotA.Metrics, wantA.Metrics)
	}
	same("actor", wantA.Checkpoint, gotA.Checkpoint)
}

// New builds the backend the options select.
func TestNew(t *testing.T) {
	if tr, err := New(nil, Options{}); err != nil || tr.(*Reference).Opt.Actor.Epochs != 1 {
		t.Fatalf("default backend: %#v %v", tr, err)
	}
	tr, err := New(nil, Options{Backend: BackendExec, Exec: Exec{Argv: []string{"torchrun", "{job}", "{out}"}, Dir: "/w"}})
	if e, ok := tr.(*Exec); err != nil || !ok || e.Argv[0] != "torchrun" || e.Dir != "/w" {
		t.Fatalf("exec backend: %#v %v", tr, err)
	}
	if _, err := New(nil, Options{Backend: BackendExec}); err == nil {
		t.Fatal("exec backend without a command accepted")
	}
	if _, err := New(nil, Options{Backend: "torch"}); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Fatalf("unknown backend: %v", err)
	}
}
