package config

import (
	"strings"
	"testing"
)

func TestInferenceSection(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte("inference:\n  backend: sglang\n  url: http://gpu-1:30000\n  precision: f32\n  sampling:\n    temperature: 0.7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Inference.Backend != "sglang" || cfg.Inference.Sampling.Temperature != 0.7 || cfg.Inference.Sampling.TopP != 1 || cfg.Inference.Model.Layers != 2 {
		t.Fatalf("%+v", cfg.Inference)
	}
	for _, c := range []struct{ yaml, want string }{
		{"inference:\n  backend: tgi\n", "inference.backend"},
		{"inference:\n  backend: vllm\n", "inference.url"},
		{"inference:\n  url: gpu-1:30000\n", "inference.url"},
		{"inference:\n  precision: fp8\n", "inference.precision"},
		{"inference:\n  model:\n    heads: 3\n", "inference.model.heads"},
		{"inference:\n  model:\n    top_k: 9\n", "inference.model.top_k"},
		{"inference:\n  sampling:\n    top_p: 0\n", "inference.sampling.top_p"},
		{"inference:\n  timeout: 0s\n", "inference.timeout"},
		{"inference:\n  sampling:\n    temprature: 1\n", "temprature"},
	} {
		_, err := Parse("p.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming %s", c.yaml, err, c.want)
		}
	}
}
