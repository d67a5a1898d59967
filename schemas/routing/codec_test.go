package routing

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestRoundTripEncodings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := []struct{ T, L, k, E int }{
		{0, 1, 1, 2}, {1, 1, 1, 2}, {3, 2, 1, 2}, {64, 48, 8, 256}, {17, 3, 8, 64}, {9, 4, 2, 300},
		{5, 2, 64, 65536}, {20, 5, 16, 1024}, {11, 3, 7, 8}, {6, 2, 4, 4},
	}
	for _, sh := range shapes {
		for _, gen := range []string{"uniform", "correlated"} {
			var r *Record
			var err error
			if gen == "uniform" {
				r, err = Uniform(rng, sh.T, sh.L, sh.k, sh.E)
			} else {
				r, err = Correlated(rng, sh.T, sh.L, sh.k, sh.E, 0.8, 1.1)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, enc := range []Encoding{Packed, PackedZstd, Rank, Delta, Auto} {
				b, err := Encode(nil, r, enc)
				if (enc == Rank || enc == Delta) && !Rankable(sh.k, sh.E) {
					if err == nil {
						t.Fatalf("%v %s: unrankable shape accepted", sh, enc)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%v %s %s: %v", sh, gen, enc, err)
				}
				got, err := Decode(b)
				if err != nil {
					t.Fatalf("%v %s %s: decode: %v", sh, gen, enc, err)
				}
				if !got.Equal(r) {
					t.Fatalf("%v %s %s: round trip differs", sh, gen, enc)
				}
			}
		}
	}
}

func TestUniformSizeGoal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	r, err := Uniform(rng, 256, 48, 8, 256)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(nil, r, Auto)
	if err != nil {
		t.Fatal(err)
	}
	ratio := float64(len(b)) / float64(r.RawBytes())
	t.Logf("uniform 8-of-256: %d bytes for %d raw (%.4f), encoding %s", len(b), r.RawBytes(), ratio, Encoding(b[1]))
	if ratio > 0.8 {
		t.Fatalf("stored %.4f× raw, want ≤ 0.8", ratio)
	}
	c, err := Correlated(rng, 256, 48, 8, 256, 0.8, 1.1)
	if err != nil {
		t.Fatal(err)
	}
	for _, enc := range []Encoding{PackedZstd, Rank, Delta, Auto} {
		b, _ := Encode(nil, c, enc)
		t.Logf("correlated %s: %.4f", enc, float64(len(b))/float64(c.RawBytes()))
	}
}

func TestRejectsBadSets(t *testing.T) {
	r, _ := NewRecord(2, 2, 3, 10)
	if err := r.Set(0, 0, []int{1, 1, 2}); err == nil || !contains(err, "selected twice") {
		t.Fatalf("duplicate: %v", err)
	}
	if err := r.Set(0, 0, []int{1, 10, 2}); err == nil || !contains(err, "outside [0, 10)") {
		t.Fatalf("range: %v", err)
	}
	r.IDs = []byte{0, 1, 2, 0, 1, 2, 3, 2, 5, 0, 1, 2}
	_, err := Encode(nil, r, Auto)
	if err == nil || !contains(err, "token 1 layer 0") || !contains(err, "not ascending") {
		t.Fatalf("unsorted: %v", err)
	}
	r.IDs = []byte{0, 1, 2, 0, 1, 2, 3, 3, 5, 0, 1, 2}
	if _, err := Encode(nil, r, Auto); err == nil || !contains(err, "selected twice") {
		t.Fatalf("dup: %v", err)
	}
	r.IDs = []byte{0, 1, 2, 0, 1, 2, 3, 4, 5, 0, 1, 12}
	if _, err := Encode(nil, r, Auto); err == nil || !contains(err, "token 1 layer 1") || !contains(err, "outside") {
		t.Fatalf("range: %v", err)
	}
}

func TestCorruptInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	r, _ := Correlated(rng, 40, 4, 8, 256, 0.8, 1.1)
	for _, enc := range []Encoding{Packed, PackedZstd, Rank, Delta} {
		b, err := Encode(nil, r, enc)
		if err != nil {
			t.Fatal(err)
		}
		for i := range b {
			c := append([]byte{}, b...)
			c[i] ^= 0x10
			if _, err := Decode(c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: flipped byte %d: %v", enc, i, err)
			}
		}
		for n := range len(b) {
			if _, err := Decode(b[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: truncated to %d: %v", enc, n, err)
			}
		}
	}
}

func contains(err error, s string) bool {
	return err != nil && len(s) > 0 && stringsContains(err.Error(), s)
}
