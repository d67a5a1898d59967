package reward

import (
	"github.com/t1pipe/t1/check"
	"github.com/t1pipe/t1/harbor/verifier"
)

// Settings configure scoring (stages.reward in pipeline.yaml).
type Settings struct {
	// Mode is count (the recipe), fraction or binary (ablations); it
	// applies to every run.
	Mode verifier.Mode `yaml:"mode"`
	// Scale is the reward per passed assertion, frozen in run.started; a
	// run whose run.started froze none is scored with this one.
	Scale float64 `yaml:"scale"`
	// Unfinished is what a training attempt that ended without declaring
	// completion (out of turns, tokens or time) earns: UnfinishedScore,
	// what its verifier says (the recipe), or UnfinishedZero, nothing. An
	// attempt that solves its task and then replies until its turns run
	// out is rewarded, under token-level loss, mostly for those replies;
	// zero rewards only attempts that end. Evaluations are scored alike
	// under both.
	Unfinished string `yaml:"unfinished"`
}

// The values of Settings.Unfinished.
const (
	UnfinishedScore = "score"
	UnfinishedZero  = "zero"
)

// DefaultSettings score the count of passed assertions.
func DefaultSettings() Settings {
	return Settings{Mode: verifier.ModeCount, Scale: 1, Unfinished: UnfinishedScore}
}

// Check reports every invalid setting.
func (s Settings) Check(r check.Report) {
	switch s.Mode {
	case verifier.ModeCount, verifier.ModeFraction, verifier.ModeBinary:
	default:
		r("mode", "unknown mode %q (want count, fraction or binary)", s.Mode)
	}
	if s.Unfinished != UnfinishedScore && s.Unfinished != UnfinishedZero {
		r("unfinished", "unknown value %q (want score or zero)", s.Unfinished)
	}
	if !(s.Scale > 0) {
		r("scale", "must be above 0, got %v", s.Scale)
	}
}
