package trainer

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/t1pipe/t1/moe"
)

// Supervised steps on the embedded corpus lower the model's loss on it.
func TestSFTLowersLoss(t *testing.T) {
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	cfg := moe.DefaultConfig()
	cfg.Context = 128
	m, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opt := moe.NewAdam(m, moe.AdamConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	ids := tok.Encode(moe.Corpus())
	var seqs [][]int
	for i := 0; i+64 <= len(ids) && len(seqs) < 4; i += 64 {
		seqs = append(seqs, ids[i:i+64])
	}
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
	if _, err := SFTStep(m, opt, [][]int{{1, 2, 3}}, [][]float32{{0, 0}}, 1); err == nil {
		t.Fatal("an all-zero mask accepted")
	}
}

// Steps take the demonstrations in turn, wrapping around, so each is used
// equally often; a batch of 0 or of at least all of them is all of them.
func TestMinibatchTakesDemonstrationsInTurn(t *testing.T) {
	seqs := [][]int{{0}, {1}, {2}, {3}, {4}}
	masks := [][]float32{{0}, {1}, {2}, {3}, {4}}
	var got [][]int
	uses := make([]int, len(seqs))
	for k := range 5 {
		bs, bm := minibatch(seqs, masks, k, 2, &passOrder{n: len(seqs)})
		var ids []int
		for i := range bs {
			if float32(bs[i][0]) != bm[i][0] {
				t.Fatalf("step %d: sequence %v paired with mask %v", k, bs[i], bm[i])
			}
			ids = append(ids, bs[i][0])
			uses[bs[i][0]]++
		}
		got = append(got, ids)
	}
	want := [][]int{{0, 1}, {2, 3}, {4, 0}, {1, 2}, {3, 4}}
	for k := range want {
		if !slices.Equal(got[k], want[k]) {
			t.Fatalf("steps %v, want %v", got, want)
		}
	}
	for i, n := range uses {
		if n != 2 {
			t.Fatalf("demonstration %d used %d times in 5 steps of 2 over 5: %v", i, n, uses)
		}
	}
	for _, size := range []int{0, 5, 9} {
		if bs, _ := minibatch(seqs, masks, 3, size, &passOrder{n: len(seqs)}); len(bs) != len(seqs) {
			t.Fatalf("size %d: %d sequences", size, len(bs))
		}
	}
}

// A seeded order takes every demonstration once per pass, in an order
// that differs between passes and between seeds and is the same on a
// rerun.
func TestMinibatchSeededPasses(t *testing.T) {
	const n, size, steps = 7, 3, 14 // six passes
	seqs, masks := make([][]int, n), make([][]float32, n)
	for i := range n {
		seqs[i], masks[i] = []int{i}, []float32{float32(i)}
	}
	stream := func(seed uint64) []int {
		o := &passOrder{seed: seed, n: n}
		var ids []int
		for k := range steps {
			bs, bm := minibatch(seqs, masks, k, size, o)
			for i := range bs {
				if float32(bs[i][0]) != bm[i][0] {
					t.Fatalf("seed %d step %d: sequence %v paired with mask %v", seed, k, bs[i], bm[i])
				}
				ids = append(ids, bs[i][0])
			}
		}
		return ids
	}
	a := stream(11)
	passes := map[string]bool{}
	for p := 0; p+n <= len(a); p += n {
		pass := slices.Clone(a[p : p+n])
		passes[fmt.Sprint(pass)] = true
		slices.Sort(pass)
		for i, id := range pass {
			if id != i {
				t.Fatalf("pass %d of seed 11 is not a permutation: %v", p/n, a[p:p+n])
			}
		}
	}
	if len(passes) < 2 {
		t.Fatalf("every pass in one order: %v", a)
	}
	if !slices.Equal(a, stream(11)) {
		t.Fatal("seed 11 drew another order on a rerun")
	}
	if slices.Equal(a, stream(12)) {
		t.Fatal("seeds 11 and 12 drew the same order")
	}
}

// The cosine schedule starts at the configured rate and falls
// monotonically to near 0 at the last step; constant keeps the rate.
func TestSFTScheduleCosine(t *testing.T) {
	o := SFTOptions{Adam: moe.AdamConfig{LR: 1e-3}, Schedule: ScheduleCosine}
	const n = 100
	if got := sftLR(o, 0, n); got != 1e-3 {
		t.Fatalf("first step at %g, want 1e-3", got)
	}
	if got := sftLR(o, n/2, n); math.Abs(got-5e-4) > 1e-12 {
		t.Fatalf("middle step at %g, want 5e-4", got)
	}
	prev := math.Inf(1)
	for k := range n {
		lr := sftLR(o, k, n)
		if lr >= prev || lr <= 0 {
			t.Fatalf("step %d at %g after %g", k, lr, prev)
		}
		prev = lr
	}
	if prev > 1e-6 {
		t.Fatalf("last step at %g, want near 0", prev)
	}
	for _, s := range []string{"", ScheduleConstant} {
		if got := sftLR(SFTOptions{Adam: moe.AdamConfig{LR: 1e-3}, Schedule: s}, n-1, n); got != 1e-3 {
			t.Fatalf("schedule %q: last step at %g", s, got)
		}
	}
}
