package execute

import (
	"context"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/ui"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// The viewer's trainer view is the policy's own: an attempt the sampler
// routed as the policy's router does is routed otherwise at no layer,
// and its replayed log-probs are the policy's; a sampler that routed at
// random is routed otherwise at most tokens of every layer, and the
// gap page shows the trainer's log-probs beside the sampler's.
func TestRescorerIsThePolicys(t *testing.T) {
	ctx := context.Background()
	log, st := testinfra.Log(t), testinfra.FreshStore(t)
	cfg := moe.Config{Vocab: 512, Layers: 3, DModel: 16, Heads: 2, KVHeads: 1, HeadDim: 8, RopeTheta: 10000, RMSNormEps: 1e-6,
		NormTopKProb: true, Experts: 8, TopK: 2, DFF: 16, Context: 256, Seed: 7}
	m, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if err := (&moe.Checkpoint{Model: m, Tokenizer: tok}).Save(ctx, st, keys.Policy("r", 1)); err != nil {
		t.Fatal(err)
	}
	ev, err := engine.NewRootEvent("r", schemas.RunStarted, "start", schemas.RunStartedPayload{Iterations: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := log.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int, 120)
	ids32 := make([]int32, len(ids))
	for i := range ids {
		ids[i] = rng.IntN(cfg.Vocab)
		ids32[i] = int32(ids[i])
	}
	own, err := m.Forward(ids, moe.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The sampler's record covers all but the last token.
	ownRec, err := routing.NewRecord(len(ids)-1, cfg.Layers, cfg.TopK, cfg.Experts)
	if err != nil {
		t.Fatal(err)
	}
	for tk := range ownRec.Tokens {
		for l := range cfg.Layers {
			var set []int
			for _, e := range own.LiveRouting.At(tk, l) {
				set = append(set, int(e))
			}
			if err := ownRec.Set(tk, l, set); err != nil {
				t.Fatal(err)
			}
		}
	}
	random, err := routing.Uniform(rng, len(ids)-1, cfg.Layers, cfg.TopK, cfg.Experts)
	if err != nil {
		t.Fatal(err)
	}
	r := &Rescorer{Log: log, Store: st}
	got, err := r.Rescore(ctx, "r", 1, ui.Chunk{IDs: ids32, Routing: ownRec})
	if err != nil {
		t.Fatal(err)
	}
	for i, lp := range own.LogProbs {
		if got.LogProbs[i+1] != lp {
			t.Fatalf("token %d: replaying the policy's own routing scores %v, the policy %v", i+1, got.LogProbs[i+1], lp)
		}
	}
	// Another routing replayed scores otherwise; the router's own choice
	// stays the policy's.
	other, err := r.Rescore(ctx, "r", 1, ui.Chunk{IDs: ids32, Routing: random})
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i, lp := range own.LogProbs {
		if other.LogProbs[i+1] != lp {
			differ++
		}
		for l := range cfg.Layers {
			for j, e := range own.LiveRouting.At(i, l) {
				if other.Live.At(i, l, j) != int(e) {
					t.Fatalf("token %d layer %d: live experts differ from the policy's own", i, l)
				}
			}
		}
	}
	if differ < len(own.LogProbs)/2 {
		t.Fatalf("replaying a random routing changed %d of %d log-probs", differ, len(own.LogProbs))
	}
	if _, err := r.Rescore(ctx, "r", 2, ui.Chunk{IDs: ids32}); err == nil {
		t.Fatal("a policy version the run never stored scored")
	}

	// Two attempts in the tables: one routed as the policy routes, one at random.
	for a, rec := range []*routing.Record{ownRec, random} {
		task := fmt.Sprintf("t%d", a)
		lps := make([]float32, len(ids))
		mask := make([]bool, len(ids))
		for i := 60; i < len(ids); i++ {
			mask[i], lps[i] = true, own.LogProbs[i-1]-0.25
		}
		row, err := schemas.NewRoutingRow("r", task, 0, 0, rec, routing.Packed)
		if err != nil {
			t.Fatal(err)
		}
		row.PolicyVersion = 1
		for _, err := range []error{
			write(ctx, st, []schemas.TokenRow{{Run: "r", TaskID: task, PolicyVersion: 1, TokenIDs: ids32, LogProbs: lps, LossMask: mask, DriftRepair: "none"}}),
			write(ctx, st, []schemas.RoutingRow{row}),
			write(ctx, st, []schemas.TrajectoryRow{{Run: "r", TaskID: task, Purpose: "train", PolicyVersion: 1, Tokens: int64(len(ids)), Chunks: 1}}),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	srv := &ui.Server{Log: log, Store: st, Rescorer: r}
	get := func(path string) string {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		b, _ := io.ReadAll(w.Result().Body)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, w.Code, b)
		}
		return string(b)
	}
	share := regexp.MustCompile(`<tr><td>(\d+)</td><td class="n">(\d+)</td><td class="n">(\d+)</td>`)
	for a, want := range []func(differ, tokens int) bool{
		func(d, n int) bool { return d == 0 && n == len(ids)-1 },
		func(d, n int) bool { return d > n/2 && n == len(ids)-1 },
	} {
		body := get(fmt.Sprintf("/runs/r/routing?it=0&purpose=train&v=1&task=t%d&n=0&token=5", a))
		rows := share.FindAllStringSubmatch(body[regexp.MustCompile(`id="mismatch"`).FindStringIndex(body)[0]:], -1)
		if len(rows) < cfg.Layers {
			t.Fatalf("attempt %d: %d mismatch rows", a, len(rows))
		}
		for _, row := range rows[:cfg.Layers] {
			var n, d int
			fmt.Sscan(row[2], &n)
			fmt.Sscan(row[3], &d)
			if !want(d, n) {
				t.Errorf("attempt %d layer %s: %d of %d tokens routed otherwise", a, row[1], d, n)
			}
		}
	}
	// The gap of each sampled token: the trainer's log-prob (the policy's,
	// its routing replayed) minus the sampler's, 0.25 by construction.
	body := html.UnescapeString(get("/runs/r/attempt?it=0&purpose=train&v=1&task=t0&n=0&colour=gap"))
	gaps := regexp.MustCompile(`\(gap ([-+0-9.]+)\)`).FindAllStringSubmatch(body, -1)
	if len(gaps) != len(ids)-60 {
		t.Fatalf("%d gaps shown, %d sampled tokens", len(gaps), len(ids)-60)
	}
	for _, g := range gaps {
		if g[1] != "+0.2500" {
			t.Fatalf("gap %s, want +0.2500", g[1])
		}
	}
}

func write[R schemas.Row](ctx context.Context, st store.ObjectStore, rows []R) error {
	_, err := schemas.WriteTable(ctx, st, "r", 0, rows, schemas.WriterOptions{})
	return err
}
