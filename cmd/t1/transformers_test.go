package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/moe"
)

// A Qwen3-MoE that transformers wrote — bfloat16, sharded, with t1's
// tokenizer files beside it as a model directory has its own — is an
// inference.checkpoint `t1 rollout` plays an episode from with the
// in-process engine: its weights load, it samples with routing of its
// shape, and the loss region does not drift.
func TestRolloutTransformersCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs transformers, then an episode: about 15 s")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap unavailable (make setup installs it)")
	}
	py := testinfra.Python(t)
	dir := filepath.Join(t.TempDir(), "model")
	work := t.TempDir()
	jobs, out := filepath.Join(work, "jobs.json"), filepath.Join(work, "out.json")
	b, err := json.Marshal(map[string]any{"jobs": []map[string]any{{"op": "init", "kind": "policy", "seed": 4, "dir": dir, "dtype": "bfloat16",
		"max_shard_size": "100KB", "config": map[string]any{"vocab_size": 512, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
			"num_key_value_heads": 2, "head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
			"max_position_embeddings": 2048, "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "norm_topk_prob": true}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jobs, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command(py, "../../moe/testdata/qwen3_moe_reference.py", jobs, out).CombinedOutput(); err != nil {
		t.Fatalf("transformers: %v\n%s", err, msg)
	}
	var res struct {
		Results []struct {
			Error string   `json:"error"`
			Files []string `json:"files"`
		} `json:"results"`
	}
	if b, err = os.ReadFile(out); err != nil || json.Unmarshal(b, &res) != nil || len(res.Results) != 1 || res.Results[0].Error != "" {
		t.Fatalf("transformers: %s %v", b, err)
	}
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	files, err := moe.TokenizerFilesOf(tok)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cb, err := os.ReadFile(filepath.Join(dir, moe.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	mc, _, err := moe.ParseConfig(cb)
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "inference:\n  checkpoint: "+dir+"\nstages:\n  rollout:\n    max_new_tokens: 16\n")
	rows := filepath.Join(t.TempDir(), "rows.json")
	msg, err := t1(t, "rollout", "--config", cfg, "--task", "../../harbor/testdata/tasks/log-rotate", "--max-turns", "2",
		"--seed", "3", "--verify=false", "--rows", rows, "--log-level", "warn")
	if err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	mm := regexp.MustCompile(`after (\d+) turns, (\d+) sampled tokens, .* loss drift (\d+)`).FindStringSubmatch(msg)
	if mm == nil || mm[1] == "0" || mm[2] == "0" || mm[3] != "0" {
		t.Fatalf("want an episode of sampled turns with loss drift 0:\n%s", msg)
	}
	readRows(t, rows, mc)
}
