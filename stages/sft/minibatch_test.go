package sft

import (
	"slices"
	"testing"
)

// Steps take the demonstrations in turn, wrapping around, so each is used
// equally often; a batch of 0 or of at least all of them is all of them.
func TestMinibatchTakesDemonstrationsInTurn(t *testing.T) {
	seqs := [][]int{{0}, {1}, {2}, {3}, {4}}
	masks := [][]float32{{0}, {1}, {2}, {3}, {4}}
	var got [][]int
	uses := make([]int, len(seqs))
	for k := range 5 {
		bs, bm := minibatch(seqs, masks, k, 2)
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
		if bs, _ := minibatch(seqs, masks, 3, size); len(bs) != len(seqs) {
			t.Fatalf("size %d: %d sequences", size, len(bs))
		}
	}
}
