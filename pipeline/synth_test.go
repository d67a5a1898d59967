package pipeline

import (
	"strings"
	"testing"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/stages/synth"
	"github.com/t1pipe/t1/trial"
)

// The llm generator takes its key from the named variable, and a missing
// one stops the run before anything starts.
func TestSynthConfigReadsTheKeyFromTheEnvironment(t *testing.T) {
	c := config.Default().Stages.Synth
	if cfg, err := synthConfig(c, nil, trial.Options{}); err != nil || cfg.LLM != nil || cfg.Generator != synth.Builtin {
		t.Fatalf("builtin: %+v, %v", cfg, err)
	}
	c.Generator = synth.LLM
	c.LLM.URL, c.LLM.Model, c.LLM.APIKeyEnv = "http://127.0.0.1:1", "m", "T1_TEST_SYNTH_KEY"
	t.Setenv("T1_TEST_SYNTH_KEY", "")
	if _, err := synthConfig(c, nil, trial.Options{}); err == nil || !strings.Contains(err.Error(), "$T1_TEST_SYNTH_KEY") {
		t.Fatalf("missing key: %v", err)
	}
	t.Setenv("T1_TEST_SYNTH_KEY", "sk-from-env")
	cfg, err := synthConfig(c, nil, trial.Options{})
	if err != nil || cfg.LLM.Client.APIKey != "sk-from-env" || cfg.LLM.Model != "m" || cfg.LLM.MaxTokens != c.LLM.MaxTokens {
		t.Fatalf("%+v, %v", cfg.LLM, err)
	}
}
