package batch

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
)

const run = "b"

// sampled stores a batch sampled from m at bf16: three attempts, the
// first of two chunks, rewarded 0, 1 and 2 (passed 0, 1, 2 of 2), and
// returns it with value rows standing in for the critic's.
func sampled(t *testing.T, st store.ObjectStore, m *moe.Model) (*schemas.BatchManifest, []schemas.ValueRow) {
	t.Helper()
	ctx := context.Background()
	s := moe.NewSampler(m, moe.BF16)
	rng := rand.New(rand.NewPCG(7, 8))
	var rows Rows
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
			g, err := s.Generate(ctx, prompt, moe.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 12, Seed: uint64(10*a + c)})
			if err != nil {
				t.Fatal(err)
			}
			ids := append(append([]int(nil), prompt...), g.OutputIDs...)
			tr := schemas.TokenRow{Run: run, TaskID: "task", Attempt: int32(a), Chunk: int32(c), LossMask: make([]bool, len(ids)), LogProbs: make([]float32, len(ids)), TopP: 1}
			vr := schemas.ValueRow{Run: run, TaskID: "task", Attempt: int32(a), Chunk: int32(c),
				Values: make([]float32, len(ids)), Advantages: make([]float32, len(ids)), Returns: make([]float32, len(ids))}
			for _, id := range ids {
				tr.TokenIDs = append(tr.TokenIDs, int32(id))
			}
			for j := range g.OutputIDs {
				tr.LossMask[len(prompt)+j] = true
				tr.LogProbs[len(prompt)+j] = g.LogProbs[j]
			}
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
			rows.Tokens = append(rows.Tokens, tr)
			rows.Routing = append(rows.Routing, rr)
			vals = append(vals, vr)
		}
		rows.Rewards = append(rows.Rewards, schemas.RewardRow{Run: run, TaskID: "task", Attempt: int32(a), Passed: int32(a), Total: 2, Reward: float64(a)})
		rows.Trajectories = append(rows.Trajectories, schemas.TrajectoryRow{Run: run, TaskID: "task", Attempt: int32(a), Chunks: int32(chunks)})
	}
	dims := schemas.ModelDims{Vocab: m.Cfg.Vocab, Layers: m.Cfg.Layers, TopK: m.Cfg.TopK, Experts: m.Cfg.Experts}
	man, _, err := Write(ctx, st, run, 0, 0, dims, rows)
	if err != nil {
		t.Fatal(err)
	}
	return man, vals
}

func model(t *testing.T) *moe.Model {
	t.Helper()
	m, err := moe.NewModel(moe.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	m := model(t)
	man, vals := sampled(t, st, m)
	b, err := Load(ctx, st, man)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Attempts) != 3 || len(b.Attempts[0].Chunks) != 2 || b.Actions == 0 {
		t.Fatalf("%d attempts, %d chunks in the first, %d actions", len(b.Attempts), len(b.Attempts[0].Chunks), b.Actions)
	}
	if b.Attempts[0].Chunks[1].Tokens.Chunk != 1 || b.Attempts[0].Chunks[0].Values != nil {
		t.Fatal("chunks out of order, or values before the critic ran")
	}
	if !b.Attempts[2].Solved() || b.Attempts[1].Solved() {
		t.Fatal("solved is passed == total")
	}
	c := b.Attempts[1].Chunks[0]
	if c.Routing.Tokens != len(c.Tokens.TokenIDs) || c.Routing.Validate(m.Cfg) != nil {
		t.Fatalf("routing of %d tokens for %d ids", c.Routing.Tokens, len(c.Tokens.TokenIDs))
	}
	withVals, _, _, err := WithValues(ctx, st, man, vals)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = Load(ctx, st, withVals); err != nil || b.Attempts[0].Chunks[0].Values == nil {
		t.Fatalf("values not joined: %v", err)
	}

	// A routing object whose chunk has a different token count.
	bad := *man
	rows, err := schemas.ReadRows[schemas.RoutingRow](ctx, st, man.RoutingFiles[0].Key, &man.RoutingFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := rows[1].Decode()
	short, _ := routing.NewRecord(rec.Tokens-1, rec.Layers, rec.TopK, rec.Experts)
	copy(short.IDs, rec.IDs)
	if rows[1], err = schemas.NewRoutingRow(run, rows[1].TaskID, int(rows[1].Attempt), int(rows[1].Chunk), short, routing.Packed); err != nil {
		t.Fatal(err)
	}
	ref, err := schemas.WriteTable(ctx, st, run, 0, rows, schemas.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bad.RoutingFiles = []schemas.FileRef{ref}
	_, err = Load(ctx, st, &bad)
	if !IsBad(err) || !strings.Contains(err.Error(), "routes") {
		t.Fatalf("mismatched routing: %v", err)
	}
	// A reference whose hash does not match the object.
	bad = *man
	bad.TokenFiles = append([]schemas.FileRef(nil), man.TokenFiles...)
	bad.TokenFiles[0].SHA256 = strings.Repeat("0", 64)
	if _, err := Load(ctx, st, &bad); !IsBad(err) || !strings.Contains(err.Error(), man.TokenFiles[0].Key) {
		t.Fatalf("wrong hash: %v", err)
	}
}
