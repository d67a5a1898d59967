package rl

import (
	"math"
	"testing"
)

func TestGroupBaseline(t *testing.T) {
	got, err := GroupBaseline([]float64{6, 2, 6, 1, 1, 0, 3}, []string{"a", "a", "a", "b", "b", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	// a: mean 14/3; b: mean 2/3; c alone: 0.
	want := []float64{6 - 14.0/3, 2 - 14.0/3, 6 - 14.0/3, 1 - 2.0/3, 1 - 2.0/3, -2.0 / 3, 0}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("attempt %d: %g, want %g", i, got[i], want[i])
		}
	}
	// A task worth more assertions is not a better attempt: two tasks
	// solved by every attempt get 0 whatever their size.
	same, _ := GroupBaseline([]float64{6, 6, 2, 2}, []string{"big", "big", "small", "small"})
	for i, v := range same {
		if v != 0 {
			t.Errorf("uniform groups: attempt %d got %g", i, v)
		}
	}
	if _, err := GroupBaseline([]float64{math.NaN()}, []string{"a"}); err == nil {
		t.Error("a NaN reward was accepted")
	}
	if _, err := GroupBaseline([]float64{1}, nil); err == nil {
		t.Error("mismatched lengths were accepted")
	}
}

func TestWeighAttempts(t *testing.T) {
	// Attempt 0: 1 action over one chunk; attempt 1: 3 actions over two
	// chunks. Every attempt ends with the same total weight, N/K = 2.
	loss := [][]bool{{false, true}, {false, true, true}, {true}}
	adv := [][]float32{{0, 1}, {0, 1, 1}, {1}}
	if err := WeighAttempts([]int{0, 1, 1}, loss, adv); err != nil {
		t.Fatal(err)
	}
	sum := map[int]float64{}
	for i, a := range []int{0, 1, 1} {
		for j, l := range loss[i] {
			if l {
				sum[a] += float64(adv[i][j])
			} else if adv[i][j] != 0 {
				t.Errorf("chunk %d token %d is no action but has advantage %g", i, j, adv[i][j])
			}
		}
	}
	for a, s := range sum {
		if math.Abs(s-2) > 1e-6 {
			t.Errorf("attempt %d weighs %g, want 2", a, s)
		}
	}
	if err := WeighAttempts([]int{0}, loss, adv); err == nil {
		t.Error("mismatched lengths were accepted")
	}
}
