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
// refused: its weights do not load into the reference model (ReadDims
// reads its dimensions).
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
		return Config{}, fmt.Errorf("moe config: model_type %q is not the reference MoE (%s): such a model is served by a remote engine (inference.backend: sglang or vllm) and trained by the exec trainer", mt, ModelType)
	}
	var h hfConfig
	if err := strictJSON(b, &h); err != nil {
		return Config{}, fmt.Errorf("moe config: %w", err)
	}
	c := Config{Vocab: h.VocabSize, Layers: h.NumHiddenLayers, DModel: h.HiddenSize, Heads: h.NumAttentionHeads, Experts: h.NumExperts,
		TopK: h.NumExpertsPerTok, DFF: h.MoeIntermediateSize, Context: h.MaxPositionEmbeddings, Seed: h.InitSeed, RopeTheta: h.RopeTheta}
	return c, c.Validate()
}

// Dims are the dimensions a run needs of any Mixture-of-Experts model:
// they size the routing records and the context.
type Dims struct {
	// ModelType is config.json's model_type (t1_moe for the reference).
	ModelType string
	Vocab     int
	Layers    int
	Experts   int
	TopK      int
	Context   int
}

// ReadDims reads the dimensions of any Hugging Face MoE config.json (the
// reference model's, Qwen3-MoE's, Mixtral's, DeepSeek's naming of the
// expert count); a model without experts is refused, since routing replay
// needs them.
func ReadDims(b []byte) (Dims, error) {
	var h struct {
		ModelType             string `json:"model_type"`
		VocabSize             int    `json:"vocab_size"`
		NumHiddenLayers       int    `json:"num_hidden_layers"`
		NumExperts            int    `json:"num_experts"`
		NumLocalExperts       int    `json:"num_local_experts"`
		NRoutedExperts        int    `json:"n_routed_experts"`
		NumExpertsPerTok      int    `json:"num_experts_per_tok"`
		MaxPositionEmbeddings int    `json:"max_position_embeddings"`
		// The reference model's earlier layout.
		Vocab  int `json:"vocab"`
		Layers int `json:"layers"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return Dims{}, fmt.Errorf("config.json: %w", err)
	}
	if h.Layers > 0 || h.Vocab > 0 {
		c, err := ParseConfig(b)
		if err != nil {
			return Dims{}, err
		}
		return c.Dims(), nil
	}
	d := Dims{ModelType: h.ModelType, Vocab: h.VocabSize, Layers: h.NumHiddenLayers, Experts: max(h.NumExperts, h.NumLocalExperts, h.NRoutedExperts),
		TopK: h.NumExpertsPerTok, Context: h.MaxPositionEmbeddings}
	switch {
	case d.Vocab < 1 || d.Layers < 1 || d.Context < 1:
		return Dims{}, fmt.Errorf("config.json (model_type %q): vocab_size, num_hidden_layers and max_position_embeddings must be positive, got %d, %d, %d", d.ModelType, d.Vocab, d.Layers, d.Context)
	case d.Experts < 1 || d.TopK < 1 || d.TopK > d.Experts:
		return Dims{}, fmt.Errorf("config.json (model_type %q): not a Mixture-of-Experts model t1 can replay (experts %d, num_experts_per_tok %d)", d.ModelType, d.Experts, d.TopK)
	}
	return d, nil
}

// Dims are the reference model's dimensions.
func (c Config) Dims() Dims {
	return Dims{ModelType: ModelType, Vocab: c.Vocab, Layers: c.Layers, Experts: c.Experts, TopK: c.TopK, Context: c.Context}
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
