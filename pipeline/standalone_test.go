package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/config"
)

// The oracle's episode takes the configured context, grown by the first
// turn where that turn would take most of it; a context asked for that
// the first turn outgrows is refused, saying what would fit.
func TestStandaloneOracleContext(t *testing.T) {
	cfg := config.Default()
	ctx := context.Background()
	o := StandaloneOptions{Policy: "oracle", Solution: "echo hi\n", Instruction: "Write hi.", MaxTurns: 3, Seed: 1}
	s, err := StandaloneEpisode(ctx, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if s.Config.Context != Episode(cfg).Context || s.Config.MaxTurns != 3 || s.Engine == nil {
		t.Fatalf("context %d, turns %d", s.Config.Context, s.Config.MaxTurns)
	}
	o.Instruction = strings.Repeat("word ", Episode(cfg).Context)
	if s, err = StandaloneEpisode(ctx, cfg, o); err != nil || s.Config.Context <= Episode(cfg).Context {
		t.Fatalf("a long instruction: %v, context %v", err, s)
	}
	o.Context = 64
	if _, err := StandaloneEpisode(ctx, cfg, o); err == nil || !strings.Contains(err.Error(), "pass --context") {
		t.Fatalf("a context the first turn outgrows: %v", err)
	}
	o.Policy = "nope"
	if _, err := StandaloneEpisode(ctx, cfg, o); err == nil || !strings.Contains(err.Error(), `--policy "nope"`) {
		t.Fatalf("an unknown policy: %v", err)
	}
}

// The reference engine refuses, before anything starts, a checkpoint of
// an architecture it does not run.
func TestReferenceOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"model_type": "qwen2_moe", "vocab_size": 100, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1, "num_experts": 2, "num_experts_per_tok": 1, "max_position_embeddings": 64, "moe_intermediate_size": 8}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := referenceOnly(dir); err == nil || !strings.Contains(err.Error(), "runs only") {
		t.Fatalf("%v", err)
	}
	if err := referenceOnly(""); err != nil {
		t.Fatal(err)
	}
}
