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
		return Config{}, fmt.Errorf("moe config: model_type %q is not the reference MoE (%s, %s), the only architecture t1's reference trainer and engine load; "+
			"train another architecture with training.trainer.backend: exec and serve it with inference.backend: sglang or vllm", mt, ModelType, Architecture)
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

// ParseShape reads the dimensions t1 needs of a model from its
// config.json: the reference MoE's through ParseConfig, or an external
// MoE's (Qwen3-MoE's field names: vocab_size, num_hidden_layers,
// hidden_size, num_attention_heads, num_experts, num_experts_per_tok,
// moe_intermediate_size, max_position_embeddings). t1 never runs an
// external model — an engine serves it and an external trainer trains
// it — so only the shape of what they exchange with t1 is read: the
// vocabulary the ids lie in, and the layers, experts and top-k of the
// routing records. Other fields are the model's business and are not
// read. modelType is the config's model_type (ModelType for the reference
// MoE); Seed is 0 for an external model.
//
// A config.json without experts (a dense model) is refused, as is one
// whose MoE layers are not every layer (Qwen3-MoE's mlp_only_layers or a
// decoder_sparse_step above 1; DeepSeek's first_k_dense_replace): a
// routing record holds one row per layer.
func ParseShape(b []byte) (c Config, modelType string, err error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return Config{}, "", fmt.Errorf("moe config: %w", err)
	}
	_, vocab := probe["vocab"]
	_, layers := probe["layers"]
	if raw, ok := probe["model_type"]; ok {
		_ = json.Unmarshal(raw, &modelType)
	}
	if vocab || layers || modelType == ModelType {
		c, err := ParseConfig(b)
		return c, ModelType, err
	}
	var x externalConfig
	if err := json.Unmarshal(b, &x); err != nil {
		return Config{}, "", fmt.Errorf("moe config: model_type %q: %w", modelType, err)
	}
	if modelType == "" {
		return Config{}, "", fmt.Errorf("moe config: no model_type: not a Hugging Face config.json")
	}
	experts := firstSet(x.NumExperts, x.NumLocalExperts, x.NRoutedExperts)
	var missing []string
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab_size", x.VocabSize}, {"num_hidden_layers", x.NumHiddenLayers}, {"hidden_size", x.HiddenSize},
		{"num_attention_heads", x.NumAttentionHeads}, {"num_experts", experts}, {"num_experts_per_tok", x.NumExpertsPerTok},
		{"moe_intermediate_size", firstSet(x.MoeIntermediateSize, x.IntermediateSize)}, {"max_position_embeddings", x.MaxPositionEmbeddings}} {
		if f.v <= 0 {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return Config{}, "", fmt.Errorf("moe config: model_type %q lacks %v: t1 reads an MoE's dimensions under Qwen3-MoE's field names (num_experts may be num_local_experts or n_routed_experts)", modelType, missing)
	}
	if len(x.MLPOnlyLayers) > 0 || x.DecoderSparseStep > 1 || x.FirstKDenseReplace > 0 {
		return Config{}, "", fmt.Errorf("moe config: model_type %q has dense layers (mlp_only_layers %v, decoder_sparse_step %d, first_k_dense_replace %d): t1's routing records need experts at every layer",
			modelType, x.MLPOnlyLayers, x.DecoderSparseStep, x.FirstKDenseReplace)
	}
	c = Config{Vocab: x.VocabSize, Layers: x.NumHiddenLayers, DModel: x.HiddenSize, Heads: x.NumAttentionHeads, Experts: experts,
		TopK: x.NumExpertsPerTok, DFF: firstSet(x.MoeIntermediateSize, x.IntermediateSize), Context: x.MaxPositionEmbeddings, RopeTheta: x.RopeTheta}
	if err := c.Validate(); err != nil {
		return Config{}, "", fmt.Errorf("model_type %q: %w", modelType, err)
	}
	return c, modelType, nil
}

// externalConfig holds the fields of an external MoE's config.json that
// ParseShape reads, under the names the model families use.
type externalConfig struct {
	VocabSize             int     `json:"vocab_size"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	HiddenSize            int     `json:"hidden_size"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	NumExperts            int     `json:"num_experts"`       // Qwen2/3-MoE
	NumLocalExperts       int     `json:"num_local_experts"` // Mixtral
	NRoutedExperts        int     `json:"n_routed_experts"`  // DeepSeek
	NumExpertsPerTok      int     `json:"num_experts_per_tok"`
	MoeIntermediateSize   int     `json:"moe_intermediate_size"`
	IntermediateSize      int     `json:"intermediate_size"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	RopeTheta             float64 `json:"rope_theta"`
	MLPOnlyLayers         []int   `json:"mlp_only_layers"`
	DecoderSparseStep     int     `json:"decoder_sparse_step"`
	FirstKDenseReplace    int     `json:"first_k_dense_replace"`
}

func firstSet(vs ...int) int {
	for _, v := range vs {
		if v > 0 {
			return v
		}
	}
	return 0
}
