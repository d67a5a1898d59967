package trainer

import (
	"context"
	"math/rand/v2"
	"strconv"
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

// sampleBatch samples one sequence per prompt from m at bf16 (the serving
// path) and stores it as a batch with values: advantages are seeded
// ±1 draws, since the measured gap depends on the policy, not on them.
func sampleBatch(b testing.TB, st store.ObjectStore, run string, iter int, version int64, m *moe.Model, prompts [][]int, newTokens int) *schemas.BatchManifest {
	b.Helper()
	ctx := context.Background()
	s := moe.NewSampler(m, moe.BF16)
	rng := rand.New(rand.NewPCG(uint64(iter), 1))
	var rows batch.Rows
	var vals []schemas.ValueRow
	for a, prompt := range prompts {
		g, err := s.Generate(ctx, prompt, moe.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: newTokens, Seed: uint64(1000*iter + a)})
		if err != nil {
			b.Fatal(err)
		}
		ids := append(append([]int(nil), prompt...), g.OutputIDs...)
		tr := schemas.TokenRow{Run: run, TaskID: "bench", Attempt: int32(a), Iteration: int32(iter), PolicyVersion: version,
			LossMask: make([]bool, len(ids)), LogProbs: make([]float32, len(ids))}
		vr := schemas.ValueRow{Run: run, TaskID: "bench", Attempt: int32(a), Values: make([]float32, len(ids)),
			Advantages: make([]float32, len(ids)), Returns: make([]float32, len(ids))}
		adv := float32(2*rng.IntN(2) - 1)
		for i, id := range ids {
			tr.TokenIDs = append(tr.TokenIDs, int32(id))
			if i >= len(prompt) {
				tr.LossMask[i], tr.LogProbs[i], vr.Advantages[i] = true, g.LogProbs[i-len(prompt)], adv
			}
		}
		rec, err := routing.NewRecord(len(ids), m.Cfg.Layers, m.Cfg.TopK, m.Cfg.Experts)
		if err != nil {
			b.Fatal(err)
		}
		set := make([]int, m.Cfg.TopK)
		for i := range ids {
			for l := range m.Cfg.Layers {
				for j, e := range g.Routing.At(min(i, g.Routing.Tokens-1), l) {
					set[j] = int(e)
				}
				if err := rec.Set(i, l, set); err != nil {
					b.Fatal(err)
				}
			}
		}
		rr, err := schemas.NewRoutingRow(run, "bench", a, 0, rec, routing.Packed)
		if err != nil {
			b.Fatal(err)
		}
		rows.Tokens, rows.Routing, vals = append(rows.Tokens, tr), append(rows.Routing, rr), append(vals, vr)
		rows.Rewards = append(rows.Rewards, schemas.RewardRow{Run: run, TaskID: "bench", Attempt: int32(a)})
		rows.Trajectories = append(rows.Trajectories, schemas.TrajectoryRow{Run: run, TaskID: "bench", Attempt: int32(a)})
	}
	dims := schemas.ModelDims{Vocab: m.Cfg.Vocab, Layers: m.Cfg.Layers, TopK: m.Cfg.TopK, Experts: m.Cfg.Experts}
	man, _, err := batch.Write(ctx, st, run, iter, version, dims, rows)
	if err != nil {
		b.Fatal(err)
	}
	man, _, _, err = batch.WithValues(ctx, st, man, vals)
	if err != nil {
		b.Fatal(err)
	}
	return man
}

// BenchmarkReplayGap runs a short PPO run of the default model — each
// iteration samples 8 sequences of 96 new tokens at bf16 from the current
// policy, then updates it with the reference trainer — once with routing
// replay and once without, and reports the masked, token-weighted mean
// |train − sampled| log-prob over all iterations and the fraction of
// (token, layer) expert sets the trainer routed differently from the
// sampler.
func BenchmarkReplayGap(b *testing.B) {
	const iterations, seqs, newTokens = 3, 8, 96
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		b.Fatal(err)
	}
	var prompts [][]int
	corpus := tok.Encode(moe.Corpus())
	for i := range seqs {
		prompts = append(prompts, corpus[i*97:i*97+32])
	}
	for b.Loop() {
		for _, replay := range []bool{false, true} {
			st := testinfra.Store(b)
			run := "bench-off"
			if replay {
				run = "bench-on"
			}
			m, err := moe.NewModel(moe.DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			if err := (&moe.Checkpoint{Model: m, Tokenizer: tok}).Save(context.Background(), st, keys.Policy(run, 0)); err != nil {
				b.Fatal(err)
			}
			tr := NewReference(st, ReferenceOptions{Actor: ActorOptions{Epochs: 2, Clip: 0.2, Adam: moe.AdamConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, MaxGradNorm: 1, Replay: replay}})
			var gapSum float64
			var actions, mism, sets int64
			for it := range iterations {
				man := sampleBatch(b, st, run, it, int64(it), m, prompts, newTokens)
				res, err := tr.TrainActor(context.Background(), ActorJob{Manifest: man, Policy: keys.Policy(run, int64(it)), Out: keys.Policy(run, int64(it+1)), Version: int64(it + 1)})
				if err != nil {
					b.Fatal(err)
				}
				met := res.Metrics
				gapSum += met.LogProbGap * float64(met.Actions)
				actions += met.Actions
				mism += met.RoutingMismatches
				sets += met.RoutingSets
				b.Logf("replay %v iteration %d: gap %.5f (max %.4f), mismatches %d/%d, clip %.3f, KL %.5f",
					replay, it, met.LogProbGap, met.LogProbGapMax, met.RoutingMismatches, met.RoutingSets, met.ClipFraction, met.ApproxKL)
				ck, err := checkpoint.Load(context.Background(), st, res.Checkpoint)
				if err != nil {
					b.Fatal(err)
				}
				m = ck.Model
			}
			name := "replay_" + strconv.FormatBool(replay)
			b.ReportMetric(gapSum/float64(actions), name+"_gap")
			b.ReportMetric(float64(mism)/float64(sets), name+"_mismatch")
		}
	}
}
