package moe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// Qwen3-30B-A3B's config.json (testdata) is a model t1 runs: every field
// reads into the shape, and ParseShape gives the same. What t1 does not
// implement is refused with the field named; t1's own config.json reads
// back as written, for a policy and a critic; other MoEs give their
// dimensions to ParseShape only; the earlier t1_moe architecture is
// refused with the way forward.
func TestParseConfig(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testinfra.WorkDir(), "testdata/qwen3-30b-a3b/config.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Vocab: 151936, Layers: 48, DModel: 2048, Heads: 32, KVHeads: 4, HeadDim: 128, Experts: 128, TopK: 8, DFF: 768, Context: 40960,
		RopeTheta: 1e6, RMSNormEps: 1e-6, NormTopKProb: true}
	c, h, err := ParseConfig(b)
	if err != nil || c != want || h != LMHead {
		t.Fatalf("%+v %v %v, want %+v", c, h, err, want)
	}
	if c, mt, err := ParseShape(b); err != nil || mt != ModelType || c != want {
		t.Fatalf("ParseShape: %s %+v %v", mt, c, err)
	}

	for _, tc := range []struct {
		cfg  Config
		head Head
	}{{DefaultConfig(), LMHead}, {DefaultConfig(), ScoreHead}, {Config{Vocab: 40, Layers: 3, DModel: 24, Heads: 6, KVHeads: 3, HeadDim: 10, Experts: 5, TopK: 3,
		DFF: 12, Context: 64, Seed: 9, RopeTheta: 5e5, RMSNormEps: 1e-5, TieEmbeddings: true}, LMHead}} {
		own, err := MarshalConfig(tc.cfg, tc.head)
		if err != nil {
			t.Fatal(err)
		}
		if c, h, err := ParseConfig(own); err != nil || c != tc.cfg || h != tc.head {
			t.Fatalf("t1's config.json of %+v (head %d) reads back as %+v (head %d), %v", tc.cfg, tc.head, c, h, err)
		}
	}

	s := string(b)
	for name, tc := range map[string]struct{ from, to, want string }{
		"dense":          {`"num_experts": 128,`, ``, "lacks num_experts"},
		"no top-k":       {`"num_experts_per_tok": 8,`, ``, "lacks num_experts_per_tok"},
		"dense layers":   {`"mlp_only_layers": [],`, `"mlp_only_layers": [0, 1],`, "mlp_only_layers [0 1]"},
		"sparse step":    {`"decoder_sparse_step": 1,`, `"decoder_sparse_step": 2,`, "decoder_sparse_step 2"},
		"bias":           {`"attention_bias": false,`, `"attention_bias": true,`, "attention_bias"},
		"window":         {`"use_sliding_window": false,`, `"use_sliding_window": true,`, "use_sliding_window"},
		"activation":     {`"hidden_act": "silu",`, `"hidden_act": "gelu",`, `hidden_act "gelu"`},
		"yarn":           {`"rope_scaling": null,`, `"rope_scaling": {"rope_type": "yarn", "factor": 4.0},`, "rope_scaling"},
		"gqa":            {`"num_key_value_heads": 4,`, `"num_key_value_heads": 5,`, "kv_heads 5 must divide heads 32"},
		"odd head":       {`"head_dim": 128,`, `"head_dim": 127,`, "head_dim 127 must be even"},
		"top-k too big":  {`"num_experts_per_tok": 8,`, `"num_experts_per_tok": 200,`, "top_k 200 exceeds experts 128"},
		"classifier":     {`"Qwen3MoeForCausalLM"`, `"Qwen3MoeForSequenceClassification"`, "Qwen3MoeForSequenceClassification"},
		"two labels":     {`"Qwen3MoeForCausalLM"`, `"Qwen3MoeForTokenClassification"], "num_labels": 2, "x": [0`, "2 labels"},
		"no model_type":  {`"model_type": "qwen3_moe",`, ``, `model_type ""`},
		"other":          {`"model_type": "qwen3_moe",`, `"model_type": "mixtral",`, "training.trainer.backend: exec"},
		"not an integer": {`"vocab_size": 151936`, `"vocab_size": "big"`, "vocab_size"},
	} {
		mod := strings.Replace(s, tc.from, tc.to, 1)
		if mod == s {
			t.Fatalf("%s: %q not in the fixture", name, tc.from)
		}
		if _, _, err := ParseConfig([]byte(mod)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.want)
		}
	}
	// transformers 5 writes the RoPE base under rope_parameters.
	v5 := strings.Replace(s, `"rope_theta": 1000000.0,`, `"rope_parameters": {"rope_type": "default", "rope_theta": 5000.0},`, 1)
	if c, _, err := ParseConfig([]byte(v5)); err != nil || c.RopeTheta != 5000 {
		t.Fatalf("rope_parameters: %+v %v", c, err)
	}

	mixtral := strings.Replace(s, `"num_experts": 128,`, `"num_local_experts": 8,`, 1)
	mixtral = strings.Replace(mixtral, `"num_experts_per_tok": 8,`, `"num_experts_per_tok": 2,`, 1)
	mixtral = strings.Replace(mixtral, `"model_type": "qwen3_moe",`, `"model_type": "mixtral",`, 1)
	if c, mt, err := ParseShape([]byte(mixtral)); err != nil || mt != "mixtral" || c.Experts != 8 || c.TopK != 2 {
		t.Fatalf("num_local_experts: %s %+v %v", mt, c, err)
	}
	for name, mod := range map[string]string{
		"dense layers": strings.Replace(mixtral, `"mlp_only_layers": [],`, `"mlp_only_layers": [0, 1],`, 1),
		"no experts":   strings.Replace(mixtral, `"num_local_experts": 8,`, ``, 1),
	} {
		if _, _, err := ParseShape([]byte(mod)); err == nil {
			t.Errorf("%s: read", name)
		}
	}

	for name, old := range map[string]string{
		"t1_moe":       `{"architectures":["T1MoeForCausalLM"],"model_type":"t1_moe","vocab_size":512,"num_hidden_layers":2,"hidden_size":64}`,
		"first format": `{"vocab":512,"layers":2,"d_model":64,"heads":4,"experts":8,"top_k":2,"d_ff":128,"context":2048,"seed":1}`,
	} {
		_, _, err := ParseConfig([]byte(old))
		_, _, serr := ParseShape([]byte(old))
		for _, e := range []error{err, serr} {
			if e == nil || !strings.Contains(e.Error(), "earlier reference MoE") || !strings.Contains(e.Error(), "Start from a fresh model") {
				t.Errorf("%s: %v, want the earlier architecture refused with the way forward", name, e)
			}
		}
	}
}
