package agent

import (
	"context"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
)

// An episode end to end over HTTP: t1's server speaking SGLang's /generate
// serves a reference MoE with Qwen3's vocabulary; the harness renders with
// Qwen3's own template and tokenizer. The untrained model's replies are
// whatever it samples from 151,669 ids (cut at the token budget, split
// non-canonically, cut inside characters), which is what TITO must take:
// every sampled id and log-prob is kept, routing covers every chunk,
// every boundary's repair is counted and no loss-region id drifts.
func TestEpisodeQwen3OverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("a model with Qwen3's vocabulary over HTTP: seconds per turn")
	}
	tp := qwen3(t, "template")
	cfg := moe.Config{Vocab: tp.tok.VocabSize(), Layers: 2, DModel: 16, Heads: 2, KVHeads: 1, HeadDim: 8, RopeTheta: 10000, RMSNormEps: 1e-6, NormTopKProb: true, Experts: 4, TopK: 2, DFF: 16, Context: 2048, Seed: 3}
	m, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(inference.NewServer(inference.NewReference(m, nil, moe.F32, "v0"), "qwen3-vocab-reference", nil))
	defer srv.Close()
	pol, err := inference.NewSGLang(inference.SGLangOptions{URL: srv.URL, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ec := Config{MaxTurns: 5, MaxNewTokens: 24, Context: 2048, SystemPrompt: TerminusSystemPrompt,
		Sampling: inference.SamplingParams{Temperature: 1, TopP: 1, Seed: 11}, Model: ModelSettings{ActionFormat: FormatTerminus}}
	res, err := Run(ctx, pol, tp, shell(t), "List the files in /app.", ec, nil)
	if err != nil {
		t.Fatal(err)
	}
	boundaries := 0
	for _, k := range []string{schemas.RepairStrictPrefix, schemas.RepairClippedNorm, schemas.RepairTextRetokened, schemas.RepairNewChunk} {
		boundaries += res.Repairs[k]
	}
	t.Logf("%s after %d turns: repairs %v, %d chunks, %d malformed", res.Termination, len(res.Turns), res.Repairs, len(res.Chunks), res.Malformed)
	if boundaries != len(res.Turns)-1 || res.LossDrift != 0 || res.Malformed != len(res.Turns) {
		t.Fatalf("%d boundaries for %d turns, loss drift %d, %d malformed", boundaries, len(res.Turns), res.LossDrift, res.Malformed)
	}
	sampled := 0
	for i, c := range res.Chunks {
		r := res.Routing[i]
		if r == nil || r.Tokens != len(c.IDs)-1 || r.Layers != cfg.Layers || r.TopK != cfg.TopK {
			t.Fatalf("chunk %d: %d ids, routing %+v", i, len(c.IDs), r)
		}
		for j, l := range c.Loss {
			if l {
				sampled++
				if lp := c.LogProbs[j]; lp > 0 || math.IsInf(float64(lp), 0) || lp == 0 {
					t.Fatalf("chunk %d id %d: log-prob %v", i, j, lp)
				}
			}
		}
	}
	if sampled != res.Sampled {
		t.Fatalf("%d loss ids, %d sampled", sampled, res.Sampled)
	}
	rows, err := AttemptRows("r", schemas.RolloutRequestedPayload{TaskID: "t", Attempt: 0, PolicyVersion: 2}, res, cfg.Experts, "snap", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows.Tokens) != len(res.Chunks) || len(rows.Routing) != len(res.Chunks) {
		t.Fatalf("%d token rows, %d routing rows for %d chunks", len(rows.Tokens), len(rows.Routing), len(res.Chunks))
	}
	// Routing rows name the sampling policy, as the tokens rows they align
	// with do.
	for i, r := range rows.Routing {
		if r.PolicyVersion != 2 || rows.Tokens[i].PolicyVersion != 2 {
			t.Fatalf("chunk %d: routing policy version %d, tokens %d; want 2", i, r.PolicyVersion, rows.Tokens[i].PolicyVersion)
		}
	}
}
