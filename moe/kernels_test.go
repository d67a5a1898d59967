package moe

import (
	"math"
	"testing"
)

// TestExpf: expf stays within 2 ulp of the float64 exponential over the
// range softmax and silu use, and handles the edges.
func TestExpf(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x < 88.7; x += 0.00137 {
		got, want := float64(expf(x)), math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want))
		if d := math.Abs(got-want) / ulp; d > worst {
			worst = d
		}
	}
	if worst > 2 {
		t.Errorf("expf is off by %.2f ulp", worst)
	}
	for _, c := range []struct{ x, want float32 }{{0, 1}, {-200, 0}, {200, float32(math.Inf(1))}, {float32(math.Inf(-1)), 0}} {
		if got := expf(c.x); got != c.want {
			t.Errorf("expf(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if nan := float32(math.NaN()); expf(nan) == expf(nan) {
		t.Error("expf(NaN) is not NaN")
	}
}
