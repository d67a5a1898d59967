package moe

import (
	"testing"
)

// chatSeqs tokenises the embedded corpus into chunks of length n.
func chatSeqs(t testing.TB, n, count int) [][]int {
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(Corpus())
	var out [][]int
	for i := 0; i+n <= len(ids) && len(out) < count; i += n {
		out = append(out, ids[i:i+n])
	}
	return out
}

func TestSFTLowersLoss(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Context = 128
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opt := NewAdam(m, AdamConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	seqs := chatSeqs(t, 64, 4)
	first, err := SFTStep(m, opt, seqs, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	var last float64
	for i := 0; i < 15; i++ {
		if last, err = SFTStep(m, opt, seqs, nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	if !(last < first-0.5) {
		t.Fatalf("loss %.3f -> %.3f after 16 steps", first, last)
	}
	t.Logf("loss %.3f -> %.3f", first, last)
}

func TestCriticFitsValues(t *testing.T) {
	cfg := tinyConfig()
	c, err := NewCritic(cfg, AdamConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	if err != nil {
		t.Fatal(err)
	}
	ids := samplePrompt(cfg, 10)
	target := float32(2.5)
	mse := func() float64 {
		v, err := c.Values(ids)
		if err != nil {
			t.Fatal(err)
		}
		var s float64
		for _, x := range v {
			s += float64((x - target) * (x - target))
		}
		return s / float64(len(v))
	}
	before := mse()
	for i := 0; i < 30; i++ {
		p, err := c.Forward(ids)
		if err != nil {
			t.Fatal(err)
		}
		d := make([]float32, len(ids))
		for j, v := range p.Values {
			d[j] = 2 * (v - target) / float32(len(ids))
		}
		if err := c.Backward(p, d); err != nil {
			t.Fatal(err)
		}
		c.Step(1)
	}
	if after := mse(); !(after < before/4) {
		t.Fatalf("value MSE %.4f -> %.4f", before, after)
	}
}

func TestTrainingDeterministic(t *testing.T) {
	run := func(workers int) *Model {
		old := Workers
		Workers = workers
		defer func() { Workers = old }()
		cfg := tinyConfig()
		m := roughModel(t, cfg)
		opt := NewAdam(m, DefaultAdam())
		seqs := [][]int{samplePrompt(cfg, 12), samplePrompt(cfg, 9)}
		for i := 0; i < 3; i++ {
			if _, err := SFTStep(m, opt, seqs, nil, 1); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	a, b := run(1), run(3)
	for i, ta := range a.W.Tensors {
		for j, v := range ta.Data {
			if v != b.W.Tensors[i].Data[j] {
				t.Fatalf("%s[%d] differs between 1 and 3 workers: %v vs %v", ta.Name, j, v, b.W.Tensors[i].Data[j])
			}
		}
	}
}

func TestClipGradNorm(t *testing.T) {
	m := roughModel(t, tinyConfig())
	p, err := m.Forward(samplePrompt(m.Cfg, 6), ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := []float32{10, 10, 10, 10, 10}
	if err := m.Backward(p, d, nil); err != nil {
		t.Fatal(err)
	}
	before := m.ClipGradNorm(0.5)
	if before <= 0.5 {
		t.Fatalf("norm %.3f already below the clip", before)
	}
	if n := m.GradNorm(); n < 0.4999 || n > 0.5001 {
		t.Fatalf("clipped norm %.6f", n)
	}
	if err := m.Backward(p, d[:2], nil); err == nil {
		t.Fatal("wrong gradient length accepted")
	}
}
