package moe

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// config.json is written in the Hugging Face layout, so the tools of the
// field (transformers' AutoConfig, SGLang, vLLM) read the model's
// dimensions under the names they know: those of Qwen3-MoE, the closest
// architecture. Checkpoints written before held Config's own JSON
// (vocab, layers, d_model, …); ParseConfig still reads them.

// Architecture and ModelType name the reference MoE in config.json.
const (
	Architecture = "T1MoeForCausalLM"
	ModelType    = "t1_moe"
)

// hfConfig is the reference model's config.json.
type hfConfig struct {
	Architectures         []string `json:"architectures"`
	ModelType             string   `json:"model_type"`
	VocabSize             int      `json:"vocab_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	HiddenSize            int      `json:"hidden_size"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumExperts            int      `json:"num_experts"`
	NumExpertsPerTok      int      `json:"num_experts_per_tok"`
	MoeIntermediateSize   int      `json:"moe_intermediate_size"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	RopeTheta             float64  `json:"rope_theta,omitempty"`
	TorchDtype            string   `json:"torch_dtype"`
	// InitSeed is the seed a fresh model of this shape was drawn with.
	InitSeed uint64 `json:"t1_init_seed"`
}

// MarshalConfig renders c as config.json in the Hugging Face layout.
func MarshalConfig(c Config) ([]byte, error) {
	b, err := json.MarshalIndent(hfConfig{
		Architectures: []string{Architecture}, ModelType: ModelType,
		VocabSize: c.Vocab, NumHiddenLayers: c.Layers, HiddenSize: c.DModel, NumAttentionHeads: c.Heads,
		NumExperts: c.Experts, NumExpertsPerTok: c.TopK, MoeIntermediateSize: c.DFF, MaxPositionEmbeddings: c.Context,
		RopeTheta: c.RopeTheta, TorchDtype: "float32", InitSeed: c.Seed,
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseConfig decodes the reference model's config.json strictly (unknown
// fields are errors), in the Hugging Face layout or the one checkpoints
// had before, and validates it. Another architecture's config.json is
// refused: its weights do not load into the reference model.
func ParseConfig(b []byte) (Config, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return Config{}, fmt.Errorf("moe config: %w", err)
	}
	_, vocab := probe["vocab"]
	_, layers := probe["layers"]
	if vocab || layers {
		var c Config
		if err := strictJSON(b, &c); err != nil {
			return Config{}, fmt.Errorf("moe config: %w", err)
		}
		return c, c.Validate()
	}
	var mt string
	if raw, ok := probe["model_type"]; ok {
		_ = json.Unmarshal(raw, &mt)
	}
	if mt != ModelType {
		return Config{}, fmt.Errorf("moe config: model_type %q is not the reference MoE (%s), the only architecture t1's trainer and engine load", mt, ModelType)
	}
	var h hfConfig
	if err := strictJSON(b, &h); err != nil {
		return Config{}, fmt.Errorf("moe config: %w", err)
	}
	c := Config{Vocab: h.VocabSize, Layers: h.NumHiddenLayers, DModel: h.HiddenSize, Heads: h.NumAttentionHeads, Experts: h.NumExperts,
		TopK: h.NumExpertsPerTok, DFF: h.MoeIntermediateSize, Context: h.MaxPositionEmbeddings, Seed: h.InitSeed, RopeTheta: h.RopeTheta}
	return c, c.Validate()
}

// strictJSON decodes exactly one JSON value with no unknown fields.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value")
	}
	return nil
}
