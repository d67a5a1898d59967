package moe

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// tinyConfig is small enough for finite differences over every tensor.
func tinyConfig() Config {
	return Config{Vocab: 40, Layers: 2, DModel: 8, Heads: 2, KVHeads: 1, HeadDim: 4, RopeTheta: 10000, RMSNormEps: 1e-6, NormTopKProb: true, Experts: 4, TopK: 2, DFF: 6, Context: 16, Seed: 3}
}

// roughModel has weights of O(0.3) so that every nonlinearity is exercised
// (the default initialisation is nearly linear).
func roughModel(t testing.TB, cfg Config) *Model {
	t.Helper()
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	roughen(m)
	return m
}

func roughen(m *Model) {
	cfg := m.Cfg
	rng := rand.New(rand.NewPCG(cfg.Seed, 99))
	for _, ten := range m.W.Tensors {
		for i := range ten.Data {
			v := rng.NormFloat64() * 0.3
			if strings.Contains(ten.Name, "norm") {
				v += 1
			}
			ten.Data[i] = float32(v)
		}
	}
}

// gradLoss is L = Σ c_t logp_t + Σ d_t v_t, in float64.
func gradLoss(p *Pass, c, d []float32) float64 {
	var s float64
	for t, v := range p.LogProbs {
		s += float64(c[t]) * float64(v)
	}
	for t, v := range p.Values {
		s += float64(d[t]) * float64(v)
	}
	return s
}

func TestGradientsFiniteDifference(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		replay               bool
		temp                 float64
		critic, tied, unnorm bool
	}{{"live", false, 0, false, false, false}, {"replay", true, 0, false, false, false}, {"tempered", true, 0.6, false, false, false},
		{"tied, unnormalised gates", true, 0, false, true, true}, {"critic", true, 0, true, false, true}} {
		replay := tc.replay
		t.Run(tc.name, func(t *testing.T) {
			cfg := tinyConfig()
			cfg.TieEmbeddings, cfg.NormTopKProb = tc.tied, !tc.unnorm
			m := roughModel(t, cfg)
			if tc.critic {
				m = m.Critic()
				roughen(m)
			}
			rng := rand.New(rand.NewPCG(7, 8))
			ids := make([]int, 12)
			for i := range ids {
				ids[i] = rng.IntN(cfg.Vocab)
			}
			var c, d []float32
			if tc.critic {
				d = make([]float32, len(ids))
			} else {
				c = make([]float32, len(ids)-1)
			}
			for i := range c {
				c[i] = float32(rng.NormFloat64())
			}
			for i := range d {
				d[i] = float32(rng.NormFloat64())
			}
			opt := ForwardOptions{Temperature: tc.temp}
			if replay {
				// Replay a routing different from the live one: each set
				// swaps its lowest expert for one the router did not pick.
				p0, err := m.Forward(ids, ForwardOptions{})
				if err != nil {
					t.Fatal(err)
				}
				r := NewRouting(len(ids)-1, cfg.Layers, cfg.TopK)
				for tk := 0; tk < r.Tokens; tk++ {
					for l := 0; l < cfg.Layers; l++ {
						live := p0.LiveRouting.At(tk, l)
						set := r.At(tk, l)
						copy(set, live)
						for e := int32(0); e < int32(cfg.Experts); e++ {
							if !slices.Contains(live, e) {
								set[0] = e
								break
							}
						}
					}
				}
				opt.Replay = &r
			}
			p, err := m.Forward(ids, opt)
			if err != nil {
				t.Fatal(err)
			}
			if replay {
				if mm, _ := CompareRouting(p.Routing, p.LiveRouting); mm == 0 {
					t.Fatal("replayed routing equals live routing; the test would not exercise replay")
				}
			}
			m.ZeroGrad()
			if err := m.Backward(p, c, d); err != nil {
				t.Fatal(err)
			}
			const eps = 1e-2
			checked := 0
			checkedBy := map[string]int{} // tensor name -> entries compared
			for ti, ten := range m.W.Tensors {
				grad := m.G.Tensors[ti].Data
				// The largest gradient entries plus a few random ones.
				idx := make([]int, len(grad))
				for i := range idx {
					idx[i] = i
				}
				slices.SortFunc(idx, func(a, b int) int {
					return -cmpF(math.Abs(float64(grad[a])), math.Abs(float64(grad[b])))
				})
				pick := idx[:min(3, len(idx))]
				for k := 0; k < 2; k++ {
					pick = append(pick, rng.IntN(len(grad)))
				}
				for _, i := range pick {
					orig := ten.Data[i]
					eval := func(v float32) (float64, Routing) {
						ten.Data[i] = v
						q, err := m.Forward(ids, opt)
						if err != nil {
							t.Fatal(err)
						}
						return gradLoss(q, c, d), q.Routing
					}
					lp, rp := eval(orig + eps)
					lm, rm := eval(orig - eps)
					ten.Data[i] = orig
					if mm, _ := CompareRouting(rp, p.Routing); mm > 0 {
						continue // a live top-k flip: the loss is not differentiable here
					}
					if mm, _ := CompareRouting(rm, p.Routing); mm > 0 {
						continue
					}
					num := (lp - lm) / (2 * eps)
					ana := float64(grad[i])
					if diff := math.Abs(num - ana); diff > 2e-3+3e-2*math.Max(math.Abs(num), math.Abs(ana)) {
						t.Errorf("%s[%d]: analytic %.6g, numeric %.6g", ten.Name, i, ana, num)
					}
					checked++
					checkedBy[ten.Name]++
				}
			}
			// Every layer type must have a non-zero gradient that was
			// compared (not skipped for a routing flip).
			wants := []string{"embed_tokens", "input_layernorm", "q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm",
				"post_attention_layernorm", "mlp.gate.", "gate_proj", "up_proj", "down_proj", "model.norm"}
			switch {
			case tc.critic:
				wants = append(wants, "score.weight", "score.bias")
			case !tc.tied:
				wants = append(wants, "lm_head")
			}
			for _, want := range wants {
				found := false
				for ti, ten := range m.W.Tensors {
					if strings.Contains(ten.Name, want) && checkedBy[ten.Name] > 0 && slices.ContainsFunc(m.G.Tensors[ti].Data, func(v float32) bool { return v != 0 }) {
						found = true
					}
				}
				if !found {
					t.Errorf("no non-zero, compared gradient for %s", want)
				}
			}
			t.Logf("%d entries checked", checked)
		})
	}
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestForwardRejectsBadInput(t *testing.T) {
	cfg := tinyConfig()
	m := roughModel(t, cfg)
	ids := samplePrompt(cfg, 5)
	good := NewRouting(4, cfg.Layers, cfg.TopK)
	for i := range good.Experts {
		good.Experts[i] = int32(i % 2) // sets {0,1}
	}
	if _, err := m.Forward(ids, ForwardOptions{Replay: &good}); err != nil {
		t.Fatalf("valid replay: %v", err)
	}
	dup := NewRouting(4, cfg.Layers, cfg.TopK) // every set {0,0}
	short := NewRouting(2, cfg.Layers, cfg.TopK)
	wide := NewRouting(4, cfg.Layers, cfg.TopK+1)
	oob := NewRouting(4, cfg.Layers, cfg.TopK)
	copy(oob.Experts, good.Experts)
	oob.Experts[3] = int32(cfg.Experts)
	for _, c := range []struct {
		name string
		ids  []int
		r    *Routing
		want string
	}{
		{"empty", nil, nil, "empty"},
		{"id", []int{1, cfg.Vocab}, nil, "vocabulary"},
		{"context", make([]int, cfg.Context+1), nil, "context"},
		{"duplicate expert", ids, &dup, "twice"},
		{"short replay", ids, &short, "covers 2 tokens"},
		{"top_k", ids, &wide, "top_k"},
		{"expert range", ids, &oob, "outside"},
	} {
		_, err := m.Forward(c.ids, ForwardOptions{Replay: c.r})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
	if err := (Config{Vocab: 10, Layers: 1, DModel: 6, Heads: 4, KVHeads: 3, HeadDim: 3, Experts: 2, TopK: 3, DFF: 1, Context: 1}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "kv_heads 3 must divide") || !strings.Contains(err.Error(), "head_dim 3") ||
		!strings.Contains(err.Error(), "top_k") || !strings.Contains(err.Error(), "rope_theta") || !strings.Contains(err.Error(), "rms_norm_eps") {
		t.Errorf("config validation: %v", err)
	}
}

func TestInitDeterministic(t *testing.T) {
	a, _ := NewModel(tinyConfig())
	b, _ := NewModel(tinyConfig())
	cfg := tinyConfig()
	cfg.Seed++
	c, _ := NewModel(cfg)
	for i, ta := range a.W.Tensors {
		if !slices.Equal(ta.Data, b.W.Tensors[i].Data) {
			t.Fatalf("%s differs for one seed", ta.Name)
		}
	}
	if slices.Equal(a.W.Embed, c.W.Embed) || slices.Equal(a.W.Layers[0].Router, c.W.Layers[0].Router) {
		t.Fatal("different seeds gave the same weights")
	}
}
