package config

import (
	"testing"
	"time"

	"github.com/t1pipe/t1/stages/synth"
)

func TestSynthLLMParses(t *testing.T) {
	src := "stages:\n  synth:\n    generator: llm\n    llm:\n      url: http://gpu-1:8000/v1\n      model: qwen\n      api_key_env: T1_LLM_KEY\n      temperature: 0\n      timeout: 90s\n      seed: 9\n"
	c, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := synth.LLMSettings{URL: "http://gpu-1:8000/v1", Model: "qwen", APIKeyEnv: "T1_LLM_KEY", Temperature: 0, MaxTokens: 8192, Timeout: 90 * time.Second, Seed: 9}
	if c.Stages.Synth.Generator != "llm" || c.Stages.Synth.LLM != want {
		t.Fatalf("got %+v", c.Stages.Synth)
	}
}

func TestSynthErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"llm needs an endpoint", "stages:\n  synth:\n    generator: llm\n",
			"p.yaml:2:3: stages.synth.llm.url: required when generator is llm\n" +
				"p.yaml:2:3: stages.synth.llm.model: required when generator is llm"},
		{"unknown generator", "stages:\n  synth:\n    generator: gpt\n",
			`p.yaml:3:16: stages.synth.generator: unknown generator "gpt" (want builtin or llm)`},
		{"a key instead of its variable", "stages:\n  synth:\n    llm:\n      api_key_env: sk-abc123\n",
			`p.yaml:4:20: stages.synth.llm.api_key_env: "sk-abc123" is not an environment variable name (the key itself belongs in the environment, not here)`},
		{"no such key", "stages:\n  synth:\n    llm:\n      api_key: x\n",
			`p.yaml:4:7: unknown key "api_key" in stages.synth.llm; known keys: url, model, api_key_env, temperature, max_tokens, timeout, seed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.src))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got:  %v\nwant: %s", err, tc.want)
			}
		})
	}
}
