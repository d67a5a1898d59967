package moe

import (
	"cmp"
	"math"
	"slices"
	"testing"
)

// TestRouterProbsRankLiveRouting: each token's live set is the top-k of
// the probabilities RouterProbs reports, with or without a replayed
// routing in force, so a caller can order a set by them.
func TestRouterProbsRankLiveRouting(t *testing.T) {
	cfg := tinyConfig()
	m := roughModel(t, cfg)
	ids := samplePrompt(cfg, 12)
	live, err := m.Forward(ids, ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A replay that differs from the live choice wherever it can: the
	// probabilities stay the router's own.
	replay := NewRouting(len(ids), cfg.Layers, cfg.TopK)
	for i, e := range live.LiveRouting.Experts {
		replay.Experts[i] = (e + 1) % int32(cfg.Experts)
	}
	for tk := range replay.Tokens {
		for l := range replay.Layers {
			slices.Sort(replay.At(tk, l))
		}
	}
	replayed, err := m.Forward(ids, ForwardOptions{Replay: &replay})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*Pass{"live": live, "replayed": replayed} {
		for l := range cfg.Layers {
			probs := p.RouterProbs(l)
			if len(probs) != len(ids)*cfg.Experts {
				t.Fatalf("%s layer %d: %d probabilities, want %d", name, l, len(probs), len(ids)*cfg.Experts)
			}
			for tk := range ids {
				row := probs[tk*cfg.Experts : (tk+1)*cfg.Experts]
				var sum float64
				for _, v := range row {
					sum += float64(v)
				}
				if math.Abs(sum-1) > 1e-5 {
					t.Fatalf("%s token %d layer %d: probabilities sum to %v", name, tk, l, sum)
				}
				order := make([]int32, cfg.Experts)
				for e := range order {
					order[e] = int32(e)
				}
				slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(row[b], row[a]) })
				top := slices.Clone(order[:cfg.TopK])
				slices.Sort(top)
				if got := p.LiveRouting.At(tk, l); !slices.Equal(top, got) {
					t.Fatalf("%s token %d layer %d: top-%d of the probabilities %v, live routing %v", name, tk, l, cfg.TopK, top, got)
				}
			}
			probs[0] = -1
			if p.RouterProbs(l)[0] == -1 {
				t.Fatalf("%s layer %d: RouterProbs shares the pass's storage", name, l)
			}
		}
	}
	if mm, _ := CompareRouting(replayed.Routing, replayed.LiveRouting); mm == 0 {
		t.Fatal("the replayed routing never differs from the live one; the replay case tests nothing")
	}
}
