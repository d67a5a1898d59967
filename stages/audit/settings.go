package audit

import "github.com/t1pipe/t1/check"

// Settings tune the verdict (stages.audit in pipeline.yaml).
type Settings struct {
	// Threshold is the lowest weighted total that is accepted.
	Threshold float64 `yaml:"threshold"`
	// MaxSimilarity is the shingle similarity to a reference above which
	// a task is a near-duplicate.
	MaxSimilarity float64 `yaml:"max_similarity"`
	// Rerun runs the oracle a second time to catch nondeterministic
	// tasks.
	Rerun bool `yaml:"rerun"`
}

// DefaultSettings are the built-in verdict settings.
func DefaultSettings() Settings { return Settings{Threshold: 0.7, MaxSimilarity: 0.8} }

// Check reports every invalid setting.
func (s Settings) Check(r check.Report) {
	if s.Threshold < 0 || s.Threshold > 1 || s.MaxSimilarity <= 0 || s.MaxSimilarity > 1 {
		r("", "threshold %v and max_similarity %v must lie in [0, 1] and (0, 1]", s.Threshold, s.MaxSimilarity)
	}
}
