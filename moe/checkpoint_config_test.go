package moe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// An external MoE's config.json (testdata: shaped like Qwen3-30B-A3B's)
// gives its dimensions under Qwen3-MoE's field names; the reference
// model's reads as ParseConfig reads it; what t1 cannot record routing
// for is refused with the field named, and ParseConfig, the loader of
// weights, still refuses any other architecture, pointing to the exec
// trainer.
func TestParseShape(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testinfra.WorkDir(), "testdata/qwen3-30b-a3b/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, mt, err := ParseShape(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Vocab: 151936, Layers: 48, DModel: 2048, Heads: 32, Experts: 128, TopK: 8, DFF: 768, Context: 40960, RopeTheta: 1e6}
	if mt != "qwen3_moe" || c != want {
		t.Fatalf("%s %+v, want qwen3_moe %+v", mt, c, want)
	}
	if _, err := ParseConfig(b); err == nil || !strings.Contains(err.Error(), `"qwen3_moe"`) || !strings.Contains(err.Error(), "training.trainer.backend: exec") {
		t.Fatalf("the reference loader: %v", err)
	}

	own, err := MarshalConfig(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if c, mt, err := ParseShape(own); err != nil || mt != ModelType || c != DefaultConfig() {
		t.Fatalf("the reference model's config.json: %s %+v %v", mt, c, err)
	}

	s := string(b)
	for name, tc := range map[string]struct{ from, to, want string }{
		"dense":          {`"num_experts": 128,`, ``, "[num_experts]"},
		"no top-k":       {`"num_experts_per_tok": 8,`, ``, "[num_experts_per_tok]"},
		"dense layers":   {`"mlp_only_layers": [],`, `"mlp_only_layers": [0, 1],`, "experts at every layer"},
		"sparse step":    {`"decoder_sparse_step": 1,`, `"decoder_sparse_step": 2,`, "experts at every layer"},
		"top-k too big":  {`"num_experts_per_tok": 8,`, `"num_experts_per_tok": 200,`, "top_k 200 exceeds experts 128"},
		"no model_type":  {`"model_type": "qwen3_moe",`, ``, "no model_type"},
		"not an integer": {`"vocab_size": 151936`, `"vocab_size": "big"`, "vocab_size"},
	} {
		mod := strings.Replace(s, tc.from, tc.to, 1)
		if mod == s {
			t.Fatalf("%s: %q not in the fixture", name, tc.from)
		}
		if _, _, err := ParseShape([]byte(mod)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
	mixtral := strings.Replace(s, `"num_experts": 128,`, `"num_local_experts": 8,`, 1)
	mixtral = strings.Replace(mixtral, `"num_experts_per_tok": 8,`, `"num_experts_per_tok": 2,`, 1)
	if c, _, err := ParseShape([]byte(mixtral)); err != nil || c.Experts != 8 || c.TopK != 2 {
		t.Fatalf("num_local_experts: %+v %v", c, err)
	}
}
