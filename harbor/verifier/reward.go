package verifier

import (
	"fmt"
	"math"
)

// Mode is how a Report becomes a scalar reward.
type Mode string

// The reward modes. ModeCount is the recipe's (ARCHITECTURE.md §1.4); the others
// exist for ablations.
const (
	// ModeCount: passed assertions × scale. A batch mixes short and long
	// tasks, and half of a long task is worth more than half of a short one.
	ModeCount Mode = "count"
	// ModeFraction: passed / (total − skipped) × scale.
	ModeFraction Mode = "fraction"
	// ModeBinary: scale when solved, else 0.
	ModeBinary Mode = "binary"
)

// RewardFunc turns reports into rewards. Scale is fixed once, before a run
// starts, and is part of the stage configuration (so part of every reward
// event's identity).
type RewardFunc struct {
	Mode  Mode    `json:"mode"`
	Scale float64 `json:"scale"`
}

// NewRewardFunc checks mode and scale (finite, > 0).
func NewRewardFunc(mode Mode, scale float64) (RewardFunc, error) {
	switch mode {
	case ModeCount, ModeFraction, ModeBinary:
	default:
		return RewardFunc{}, fmt.Errorf("reward mode %q: want count, fraction or binary", mode)
	}
	if !(scale > 0) || math.IsInf(scale, 0) {
		return RewardFunc{}, fmt.Errorf("reward scale %v: want a finite number above 0", scale)
	}
	return RewardFunc{Mode: mode, Scale: scale}, nil
}

// Score is a reward with how it was reached.
type Score struct {
	Value float64 `json:"value"`
	// Solved is the report's binary outcome.
	Solved bool `json:"solved"`
	// Fallback: the report had no per-assertion source, so Value is binary
	// whatever the mode.
	Fallback bool `json:"fallback"`
	Mode     Mode `json:"mode"`
}

// Score applies f to r. Without per-assertion results every mode falls
// back to binary (solved → Scale, else 0). A solved task never scores
// zero: solved means at least one assertion passed (count ≥ 1 × Scale),
// or, in fallback, Scale itself.
func (f RewardFunc) Score(r *Report) Score {
	s := Score{Solved: r.Solved, Fallback: r.Fallback, Mode: f.Mode}
	binary := 0.0
	if r.Solved {
		binary = f.Scale
	}
	switch {
	case r.Fallback || f.Mode == ModeBinary:
		s.Value = binary
	case f.Mode == ModeFraction:
		if n := r.Total - r.Skipped; n > 0 {
			s.Value = float64(r.Passed) / float64(n) * f.Scale
		}
	default:
		s.Value = float64(r.Passed) * f.Scale
	}
	return s
}
