package agent

import (
	"time"

	"github.com/t1pipe/t1/config/check"
	"github.com/t1pipe/t1/infra/inference"
)

// Settings are the episode bounds a pipeline configures
// (stages.rollout in pipeline.yaml). Config holds them with the bounds
// each attempt sets for itself: turns, wall clock, sampling seed.
type Settings struct {
	// MaxNewTokens bounds one reply.
	MaxNewTokens int `yaml:"max_new_tokens"`
	// Context is the tokens the harness keeps the conversation within,
	// compacting it first; at most the model's context.
	Context int `yaml:"context"`
	// CommandTimeout is a command's default timeout.
	CommandTimeout time.Duration `yaml:"command_timeout"`
	// MaxObservation bounds one observation in bytes (head and tail kept).
	MaxObservation int `yaml:"max_observation"`
	// Temperature and TopP sample every reply.
	Temperature float64 `yaml:"temperature"`
	TopP        float64 `yaml:"top_p"`
	// SystemPrompt opens every episode: BriefSystemPrompt (the default,
	// sized for the reference model: every token of it is trained on
	// again in every chunk) or SystemPrompt, or a prompt of one's own.
	SystemPrompt string `yaml:"system_prompt"`
}

// DefaultSettings are the built-in episode bounds, small enough for the
// reference model on a laptop.
func DefaultSettings() Settings {
	return Settings{MaxNewTokens: 40, Context: 1024, CommandTimeout: 30 * time.Second, MaxObservation: 1024, Temperature: 1, TopP: 1,
		SystemPrompt: BriefSystemPrompt}
}

// Check reports every invalid setting.
func (s Settings) Check(r check.Report) {
	r.AtLeast("max_new_tokens", s.MaxNewTokens, 1)
	r.AtLeast("context", s.Context, 64)
	r.AtLeast("max_observation", s.MaxObservation, 64)
	r.Positive("command_timeout", s.CommandTimeout)
	if s.SystemPrompt == "" {
		r("system_prompt", "must not be empty")
	}
	if s.Temperature < 0 || s.TopP <= 0 || s.TopP > 1 {
		r("", "temperature %v and top_p %v: want temperature ≥ 0 and top_p in (0, 1]", s.Temperature, s.TopP)
	}
}

// Config is the episode configuration of s; the bounds it leaves zero
// take Run's defaults.
func (s Settings) Config() Config {
	return Config{MaxNewTokens: s.MaxNewTokens, Context: s.Context, CommandTimeout: s.CommandTimeout, MaxObservation: s.MaxObservation, SystemPrompt: s.SystemPrompt,
		Sampling: inference.SamplingParams{Temperature: s.Temperature, TopP: s.TopP}}
}
