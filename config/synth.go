package config

import (
	"regexp"
	"strings"
	"time"
)

// Synth configures recursive task synthesis.
type Synth struct {
	// Generator grows accepted tasks into the next round's candidates:
	// builtin (taskgen's typed executable steps) or llm (a chat model
	// behind an OpenAI-compatible endpoint extends each parent's files).
	// Round 0's fresh tasks come from the built-in steps either way.
	Generator string `yaml:"generator"`
	LLM       LLM    `yaml:"llm"`
}

// LLM is the llm generator's endpoint and sampling. The API key is read
// only from the environment variable APIKeyEnv names, never from the file.
type LLM struct {
	// URL is the server's base URL, with or without /v1;
	// /v1/chat/completions is appended.
	URL         string        `yaml:"url"`
	Model       string        `yaml:"model"`
	APIKeyEnv   string        `yaml:"api_key_env"`
	Temperature float64       `yaml:"temperature"`
	MaxTokens   int           `yaml:"max_tokens"`
	Timeout     time.Duration `yaml:"timeout"` // one request
	// Seed is mixed with the run seed and each candidate's event id into
	// the request's seed.
	Seed uint64 `yaml:"seed"`
}

func defaultSynth() Synth {
	return Synth{Generator: "builtin", LLM: LLM{Temperature: 0.7, MaxTokens: 8192, Timeout: 5 * time.Minute}}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (s Synth) check(bad func(path, format string, args ...any)) {
	const p = "stages.synth.llm"
	l := s.LLM
	switch s.Generator {
	case "builtin":
	case "llm":
		if l.URL == "" {
			bad(p+".url", "required when stages.synth.generator is llm")
		}
		if l.Model == "" {
			bad(p+".model", "required when stages.synth.generator is llm")
		}
	default:
		bad("stages.synth.generator", "unknown generator %q (want builtin or llm)", s.Generator)
	}
	if l.URL != "" && !strings.HasPrefix(l.URL, "http://") && !strings.HasPrefix(l.URL, "https://") {
		bad(p+".url", "want an http:// or https:// URL, got %q", l.URL)
	}
	if l.APIKeyEnv != "" && !envName.MatchString(l.APIKeyEnv) {
		bad(p+".api_key_env", "%q is not an environment variable name (the key itself belongs in the environment, not here)", l.APIKeyEnv)
	}
	if l.Temperature < 0 || l.Temperature > 2 {
		bad(p+".temperature", "want [0, 2], got %g", l.Temperature)
	}
	if l.MaxTokens < 1 {
		bad(p+".max_tokens", "must be at least 1, got %d", l.MaxTokens)
	}
	if l.Timeout <= 0 {
		bad(p+".timeout", "must be positive, got %s", l.Timeout)
	}
}
