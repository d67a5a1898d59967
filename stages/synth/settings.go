package synth

import (
	"regexp"
	"strings"
	"time"

	"github.com/t1pipe/t1/check"
	"github.com/t1pipe/t1/taskgen"
)

// Settings configure recursive task synthesis (stages.synth in
// pipeline.yaml).
type Settings struct {
	// Generator grows accepted tasks into the next round's candidates:
	// Builtin (taskgen's typed executable steps) or LLM (a chat model
	// behind an OpenAI-compatible endpoint extends each parent's files).
	// Round 0's fresh tasks come from the built-in steps either way.
	Generator string `yaml:"generator"`
	// Library is the step library round 0's tasks (and the builtin
	// generator's extensions) come from: taskgen's basic, basic-rename or full.
	Library string `yaml:"library"`
	// Candidates is how many tasks the builtin generator draws for each
	// one it keeps: the one whose reference solution writes the values
	// (words, file names) the round has written least, so fine-tuning on
	// the pool's demonstrations sees every value of the library several
	// times. 1 keeps every draw.
	Candidates int `yaml:"candidates"`
	// AvoidEval makes the builtin generator pass over candidates that
	// audit would exclude as near-duplicates of the held-out suite
	// (stages.audit.max_similarity), keeping the coverage choice among the
	// rest: otherwise part of the pool (65 of 576 one-step basic tasks)
	// is synthesised only to be rejected, and the rejections take most
	// from the values the suite asks for most, so the demonstrations
	// write those least. Audit's check stays the guard either way.
	AvoidEval bool `yaml:"avoid_eval"`
	// LLM is the llm generator's endpoint and sampling.
	LLM LLMSettings `yaml:"llm"`
}

// LLMSettings are the llm generator's endpoint and sampling. The API key
// is read only from the environment variable APIKeyEnv names, never from
// the file.
type LLMSettings struct {
	// URL is the server's base URL, with or without /v1;
	// /v1/chat/completions is appended.
	URL string `yaml:"url"`
	// Model is sent in every request and recorded in lineage.
	Model       string  `yaml:"model"`
	APIKeyEnv   string  `yaml:"api_key_env"`
	Temperature float64 `yaml:"temperature"`
	// MaxTokens bounds the completion's tokens.
	MaxTokens int `yaml:"max_tokens"`
	// Timeout bounds one request.
	Timeout time.Duration `yaml:"timeout"`
	// Seed is mixed with the run seed and each candidate's event id into
	// the request's seed.
	Seed uint64 `yaml:"seed"`
}

// DefaultSettings grow tasks with the built-in steps.
func DefaultSettings() Settings {
	return Settings{Generator: Builtin, Library: string(taskgen.Basic), Candidates: 8, LLM: LLMSettings{Temperature: 0.7, MaxTokens: 8192, Timeout: 5 * time.Minute}}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Check reports every invalid setting.
func (s Settings) Check(r check.Report) {
	l := s.LLM
	if _, err := taskgen.ParseLibrary(s.Library); err != nil {
		r("library", "%v", err)
	}
	if s.Candidates < 1 || s.Candidates > 64 {
		r("candidates", "want 1 to 64, got %d", s.Candidates)
	}
	switch s.Generator {
	case Builtin:
	case LLM:
		if l.URL == "" {
			r("llm.url", "required when generator is llm")
		}
		if l.Model == "" {
			r("llm.model", "required when generator is llm")
		}
	default:
		r("generator", "unknown generator %q (want builtin or llm)", s.Generator)
	}
	if l.URL != "" && !strings.HasPrefix(l.URL, "http://") && !strings.HasPrefix(l.URL, "https://") {
		r("llm.url", "want an http:// or https:// URL, got %q", l.URL)
	}
	if l.APIKeyEnv != "" && !envName.MatchString(l.APIKeyEnv) {
		r("llm.api_key_env", "%q is not an environment variable name (the key itself belongs in the environment, not here)", l.APIKeyEnv)
	}
	if l.Temperature < 0 || l.Temperature > 2 {
		r("llm.temperature", "want [0, 2], got %g", l.Temperature)
	}
	r.AtLeast("llm.max_tokens", l.MaxTokens, 1)
	r.Positive("llm.timeout", l.Timeout)
}
