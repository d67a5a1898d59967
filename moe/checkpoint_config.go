package moe

import (
	"encoding/json"
	"fmt"
	"strings"
)

// config.json is a Qwen3-MoE's, as transformers writes and reads it, so
// that transformers, SGLang and vLLM load a t1 checkpoint as the model it
// is, and t1 loads theirs.

// The names config.json gives t1's model: a policy is transformers'
// Qwen3MoeForCausalLM, a critic its Qwen3MoeForTokenClassification with
// one label.
const (
	ModelType          = "qwen3_moe"
	Architecture       = "Qwen3MoeForCausalLM"
	CriticArchitecture = "Qwen3MoeForTokenClassification"
)

// LegacyModelType is the model_type of t1's earlier reference MoE, whose
// architecture (no per-head q/k norms, RoPE over interleaved pairs, a
// value head in the policy) is not a Qwen3-MoE's. Its checkpoints are
// refused: no conversion preserves what they compute.
const LegacyModelType = "t1_moe"

// hfConfig is config.json as t1 writes it. Fields transformers would
// default are written anyway, so an engine of another version reads the
// same model.
type hfConfig struct {
	Architectures         []string          `json:"architectures"`
	ModelType             string            `json:"model_type"`
	VocabSize             int               `json:"vocab_size"`
	HiddenSize            int               `json:"hidden_size"`
	NumHiddenLayers       int               `json:"num_hidden_layers"`
	NumAttentionHeads     int               `json:"num_attention_heads"`
	NumKeyValueHeads      int               `json:"num_key_value_heads"`
	HeadDim               int               `json:"head_dim"`
	NumExperts            int               `json:"num_experts"`
	NumLocalExperts       int               `json:"num_local_experts,omitempty"` // transformers 5's name for num_experts
	NumExpertsPerTok      int               `json:"num_experts_per_tok"`
	MoeIntermediateSize   int               `json:"moe_intermediate_size"`
	MaxPositionEmbeddings int               `json:"max_position_embeddings"`
	RopeTheta             float64           `json:"rope_theta"`
	RopeParameters        map[string]any    `json:"rope_parameters"`
	RMSNormEps            float64           `json:"rms_norm_eps"`
	NormTopKProb          bool              `json:"norm_topk_prob"`
	TieWordEmbeddings     bool              `json:"tie_word_embeddings"`
	HiddenAct             string            `json:"hidden_act"`
	AttentionBias         bool              `json:"attention_bias"`
	DecoderSparseStep     int               `json:"decoder_sparse_step"`
	MLPOnlyLayers         []int             `json:"mlp_only_layers"`
	UseSlidingWindow      bool              `json:"use_sliding_window"`
	ID2Label              map[string]string `json:"id2label,omitempty"`
	Label2ID              map[string]int    `json:"label2id,omitempty"`
	TorchDtype            string            `json:"torch_dtype"`
	// InitSeed is the seed a fresh model of this shape was drawn with.
	InitSeed uint64 `json:"t1_init_seed"`
}

// MarshalConfig renders c as the config.json of a model with head h.
func MarshalConfig(c Config, h Head) ([]byte, error) {
	hc := hfConfig{
		Architectures: []string{Architecture}, ModelType: ModelType,
		VocabSize: c.Vocab, HiddenSize: c.DModel, NumHiddenLayers: c.Layers, NumAttentionHeads: c.Heads, NumKeyValueHeads: c.KVHeads,
		HeadDim: c.HeadDim, NumExperts: c.Experts, NumExpertsPerTok: c.TopK, MoeIntermediateSize: c.DFF, MaxPositionEmbeddings: c.Context,
		RopeTheta: c.RopeTheta, RopeParameters: map[string]any{"rope_type": "default", "rope_theta": c.RopeTheta},
		RMSNormEps: c.RMSNormEps, NormTopKProb: c.NormTopKProb, TieWordEmbeddings: c.TieEmbeddings,
		HiddenAct: "silu", DecoderSparseStep: 1, MLPOnlyLayers: []int{}, TorchDtype: "float32", InitSeed: c.Seed,
	}
	if h == ScoreHead {
		hc.Architectures = []string{CriticArchitecture}
		hc.ID2Label, hc.Label2ID = map[string]string{"0": "LABEL_0"}, map[string]int{"LABEL_0": 0}
		// A critic predicts values, never tokens: nothing is tied.
		hc.TieWordEmbeddings = false
	}
	b, err := json.MarshalIndent(hc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseConfig reads a Qwen3-MoE's config.json — one t1 wrote, or one
// transformers' save_pretrained wrote — into the shape and head t1 runs.
// Fields that change what the model computes and that t1 does not
// implement are refused by name: dense layers (mlp_only_layers,
// decoder_sparse_step), attention biases, sliding windows, another
// activation or RoPE scaling. Fields that only matter to other tools
// (token ids, initialiser ranges, dropout, the auxiliary loss) are not
// read. Another model_type is refused: t1 does not run it.
func ParseConfig(b []byte) (Config, Head, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Config{}, 0, fmt.Errorf("moe config: %w", err)
	}
	mt := modelTypeOf(raw)
	if err := legacy(raw, mt); err != nil {
		return Config{}, 0, err
	}
	if mt != ModelType {
		return Config{}, 0, fmt.Errorf("moe config: model_type %q is not a Qwen3-MoE (%s), the only architecture t1's reference trainer and engine run; "+
			"train another architecture with training.trainer.backend: exec and serve it with inference.backend: sglang or vllm", mt, ModelType)
	}
	// transformers' Qwen3MoeConfig defaults for what a config.json leaves out.
	h := hfConfig{NumKeyValueHeads: 4, RopeTheta: 10000, RMSNormEps: 1e-6, HiddenAct: "silu", DecoderSparseStep: 1}
	var extra struct {
		RopeScaling    json.RawMessage `json:"rope_scaling"`
		RopeParameters *struct {
			RopeType  string   `json:"rope_type"`
			RopeTheta *float64 `json:"rope_theta"`
		} `json:"rope_parameters"`
		NumLabels *int `json:"num_labels"`
	}
	h.RopeParameters = nil
	if err := json.Unmarshal(b, &h); err != nil {
		return Config{}, 0, fmt.Errorf("moe config: %w", err)
	}
	if err := json.Unmarshal(b, &extra); err != nil {
		return Config{}, 0, fmt.Errorf("moe config: %w", err)
	}
	var missing []string
	for _, f := range []string{"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_experts", "num_experts_per_tok", "moe_intermediate_size", "max_position_embeddings"} {
		if _, ok := raw[f]; !ok && (f != "num_experts" || raw["num_local_experts"] == nil) {
			missing = append(missing, f)
		}
	}
	if _, ok := raw["num_experts"]; !ok {
		h.NumExperts = h.NumLocalExperts
	}
	if len(missing) > 0 {
		return Config{}, 0, fmt.Errorf("moe config: %s lacks %s", ModelType, strings.Join(missing, ", "))
	}
	var bad []string
	if len(h.MLPOnlyLayers) > 0 {
		bad = append(bad, fmt.Sprintf("mlp_only_layers %v makes those layers dense", h.MLPOnlyLayers))
	}
	if h.DecoderSparseStep != 1 {
		bad = append(bad, fmt.Sprintf("decoder_sparse_step %d makes layers dense (t1 runs experts at every layer, step 1)", h.DecoderSparseStep))
	}
	if h.AttentionBias {
		bad = append(bad, "attention_bias true (t1's attention has no biases)")
	}
	if h.UseSlidingWindow {
		bad = append(bad, "use_sliding_window true (t1's attention is full causal)")
	}
	if h.HiddenAct != "silu" {
		bad = append(bad, fmt.Sprintf("hidden_act %q (t1's experts are SwiGLU, silu)", h.HiddenAct))
	}
	if s := strings.TrimSpace(string(extra.RopeScaling)); s != "" && s != "null" {
		bad = append(bad, fmt.Sprintf("rope_scaling %s (t1 runs the default RoPE)", s))
	}
	if rp := extra.RopeParameters; rp != nil {
		if rp.RopeType != "" && rp.RopeType != "default" {
			bad = append(bad, fmt.Sprintf("rope_parameters.rope_type %q (t1 runs the default RoPE)", rp.RopeType))
		}
		if rp.RopeTheta != nil {
			if _, top := raw["rope_theta"]; top && *rp.RopeTheta != h.RopeTheta {
				bad = append(bad, fmt.Sprintf("rope_theta %g and rope_parameters.rope_theta %g disagree", h.RopeTheta, *rp.RopeTheta))
			}
			h.RopeTheta = *rp.RopeTheta
		}
	}
	head := LMHead
	switch arch := strings.Join(h.Architectures, ","); arch {
	case "", Architecture:
	case CriticArchitecture:
		head = ScoreHead
		labels := len(h.ID2Label)
		if extra.NumLabels != nil {
			labels = *extra.NumLabels
		}
		if labels != 1 {
			bad = append(bad, fmt.Sprintf("%s with %d labels (a critic has one: num_labels 1)", CriticArchitecture, labels))
		}
	default:
		bad = append(bad, fmt.Sprintf("architectures %q (t1 runs %s and, as a critic, %s)", arch, Architecture, CriticArchitecture))
	}
	if len(bad) > 0 {
		return Config{}, 0, fmt.Errorf("moe config: %s", strings.Join(bad, "; "))
	}
	if _, ok := raw["head_dim"]; !ok && h.NumAttentionHeads > 0 {
		h.HeadDim = h.HiddenSize / h.NumAttentionHeads
	}
	c := Config{Vocab: h.VocabSize, Layers: h.NumHiddenLayers, DModel: h.HiddenSize, Heads: h.NumAttentionHeads, KVHeads: h.NumKeyValueHeads,
		HeadDim: h.HeadDim, Experts: h.NumExperts, TopK: h.NumExpertsPerTok, DFF: h.MoeIntermediateSize, Context: h.MaxPositionEmbeddings,
		Seed: h.InitSeed, RopeTheta: h.RopeTheta, RMSNormEps: h.RMSNormEps, NormTopKProb: h.NormTopKProb, TieEmbeddings: h.TieWordEmbeddings && head == LMHead}
	return c, head, c.Validate()
}

func modelTypeOf(raw map[string]json.RawMessage) string {
	var mt string
	if v, ok := raw["model_type"]; ok {
		_ = json.Unmarshal(v, &mt)
	}
	return mt
}

// legacy refuses the config.json of t1's earlier reference MoE (model_type
// t1_moe, or Config's own JSON, which the first checkpoints held).
func legacy(raw map[string]json.RawMessage, mt string) error {
	_, vocab := raw["vocab"]
	_, layers := raw["layers"]
	if mt != LegacyModelType && !vocab && !layers {
		return nil
	}
	return fmt.Errorf("moe config: model_type %s: a checkpoint of t1's earlier reference MoE, whose architecture is not a Qwen3-MoE "+
		"(no per-head q/k norms, RoPE over interleaved pairs, a value head in the policy); t1 no longer loads it and no conversion keeps what it computes. "+
		"Start from a fresh model (leave inference.checkpoint unset) or a Qwen3-MoE checkpoint; runs recorded with it still report and query", LegacyModelType)
}

// ParseShape reads the dimensions t1 needs of a model from its
// config.json: a Qwen3-MoE's through ParseConfig, or another MoE's
// (under Qwen3-MoE's field names: vocab_size, num_hidden_layers,
// hidden_size, num_attention_heads, num_experts, num_experts_per_tok,
// moe_intermediate_size, max_position_embeddings). t1 never runs another
// architecture — an engine serves it and an external trainer trains it —
// so only the shape of what they exchange with t1 is read: the vocabulary
// the ids lie in, and the layers, experts and top-k of the routing
// records. modelType is the config's model_type (ModelType for a
// Qwen3-MoE); Seed is 0 for a model t1 did not draw.
//
// A config.json without experts (a dense model) is refused, as is one
// whose MoE layers are not every layer (Qwen3-MoE's mlp_only_layers or a
// decoder_sparse_step above 1; DeepSeek's first_k_dense_replace): a
// routing record holds one row per layer.
func ParseShape(b []byte) (c Config, modelType string, err error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Config{}, "", fmt.Errorf("moe config: %w", err)
	}
	modelType = modelTypeOf(raw)
	if err := legacy(raw, modelType); err != nil {
		return Config{}, "", err
	}
	if modelType == ModelType {
		c, _, err := ParseConfig(b)
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
	kv := firstSet(x.NumKeyValueHeads, x.NumAttentionHeads)
	hd := firstSet(x.HeadDim, x.HiddenSize/x.NumAttentionHeads)
	c = Config{Vocab: x.VocabSize, Layers: x.NumHiddenLayers, DModel: x.HiddenSize, Heads: x.NumAttentionHeads, KVHeads: kv, HeadDim: hd,
		Experts: experts, TopK: x.NumExpertsPerTok, DFF: firstSet(x.MoeIntermediateSize, x.IntermediateSize), Context: x.MaxPositionEmbeddings,
		RopeTheta: x.RopeTheta, RMSNormEps: x.RMSNormEps, NormTopKProb: x.NormTopKProb}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if err := c.Validate(); err != nil {
		return Config{}, "", fmt.Errorf("model_type %q: %w", modelType, err)
	}
	return c, modelType, nil
}

// externalConfig holds the fields of another MoE's config.json that
// ParseShape reads, under the names the model families use.
type externalConfig struct {
	VocabSize             int     `json:"vocab_size"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	HiddenSize            int     `json:"hidden_size"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	NumKeyValueHeads      int     `json:"num_key_value_heads"`
	HeadDim               int     `json:"head_dim"`
	NumExperts            int     `json:"num_experts"`       // Qwen2/3-MoE
	NumLocalExperts       int     `json:"num_local_experts"` // Mixtral
	NRoutedExperts        int     `json:"n_routed_experts"`  // DeepSeek
	NumExpertsPerTok      int     `json:"num_experts_per_tok"`
	MoeIntermediateSize   int     `json:"moe_intermediate_size"`
	IntermediateSize      int     `json:"intermediate_size"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	RopeTheta             float64 `json:"rope_theta"`
	RMSNormEps            float64 `json:"rms_norm_eps"`
	NormTopKProb          bool    `json:"norm_topk_prob"`
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
