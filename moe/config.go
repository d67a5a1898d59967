package moe

import (
	"fmt"
	"math"
	"strings"
)

// Config is a model's shape: a Qwen3-MoE's, under t1's short names (the
// exec protocol and pipeline configs use them); config.json holds the
// same values under Qwen3-MoE's names (checkpoint_config.go).
type Config struct {
	Vocab  int `json:"vocab"`   // token ids, including specials (vocab_size)
	Layers int `json:"layers"`  // transformer blocks, each with an MoE feed-forward (num_hidden_layers)
	DModel int `json:"d_model"` // residual width (hidden_size)
	Heads  int `json:"heads"`   // query heads (num_attention_heads)
	// KVHeads is the number of key/value heads (num_key_value_heads); it
	// divides Heads, each group of Heads/KVHeads query heads sharing one.
	KVHeads int `json:"kv_heads"`
	// HeadDim is the width of one head (head_dim), even (RoPE rotates its
	// halves); it need not be DModel/Heads.
	HeadDim int    `json:"head_dim"`
	Experts int    `json:"experts"` // routed experts per layer (num_experts)
	TopK    int    `json:"top_k"`   // experts each token uses (num_experts_per_tok)
	DFF     int    `json:"d_ff"`    // hidden width of one expert, SwiGLU (moe_intermediate_size)
	Context int    `json:"context"` // longest sequence, prompt plus generated (max_position_embeddings)
	Seed    uint64 `json:"seed"`    // initialisation seed of a fresh model
	// RopeTheta is the RoPE base (rope_theta).
	RopeTheta float64 `json:"rope_theta"`
	// RMSNormEps is every RMSNorm's ε (rms_norm_eps).
	RMSNormEps float64 `json:"rms_norm_eps"`
	// NormTopKProb renormalises the router probabilities of a token's
	// top-k experts to sum to 1 (norm_topk_prob); without it the gates
	// are the probabilities themselves.
	NormTopKProb bool `json:"norm_topk_prob"`
	// TieEmbeddings makes the LM head the embedding matrix
	// (tie_word_embeddings).
	TieEmbeddings bool `json:"tie_embeddings"`
}

// DefaultConfig is small enough that rollouts, critic and PPO of a whole
// pipeline run in minutes on two cores.
func DefaultConfig() Config {
	return Config{Vocab: 512, Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 16, Experts: 8, TopK: 2, DFF: 128, Context: 2048, Seed: 1,
		RopeTheta: 10000, RMSNormEps: 1e-6, NormTopKProb: true}
}

// Validate reports every field that makes the shape unusable.
func (c Config) Validate() error {
	var bad []string
	pos := func(name string, v int) {
		if v <= 0 {
			bad = append(bad, fmt.Sprintf("%s must be positive, got %d", name, v))
		}
	}
	pos("vocab", c.Vocab)
	pos("layers", c.Layers)
	pos("d_model", c.DModel)
	pos("heads", c.Heads)
	pos("kv_heads", c.KVHeads)
	pos("head_dim", c.HeadDim)
	pos("experts", c.Experts)
	pos("top_k", c.TopK)
	pos("d_ff", c.DFF)
	pos("context", c.Context)
	if c.KVHeads > 0 && c.Heads > 0 && c.Heads%c.KVHeads != 0 {
		bad = append(bad, fmt.Sprintf("kv_heads %d must divide heads %d", c.KVHeads, c.Heads))
	}
	if c.HeadDim > 0 && c.HeadDim%2 != 0 {
		bad = append(bad, fmt.Sprintf("head_dim %d must be even (RoPE rotates its halves)", c.HeadDim))
	}
	if c.TopK > c.Experts {
		bad = append(bad, fmt.Sprintf("top_k %d exceeds experts %d", c.TopK, c.Experts))
	}
	if c.Experts > 65535 {
		bad = append(bad, fmt.Sprintf("experts %d exceeds 65535", c.Experts))
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		bad = append(bad, fmt.Sprintf("rope_theta must be positive, got %g", c.RopeTheta))
	}
	if !(c.RMSNormEps > 0) || c.RMSNormEps >= 1 {
		bad = append(bad, fmt.Sprintf("rms_norm_eps must be in (0, 1), got %g", c.RMSNormEps))
	}
	if len(bad) > 0 {
		return fmt.Errorf("moe config: %s", strings.Join(bad, "; "))
	}
	return nil
}

// qDim and kvDim are the widths of all query heads and of all key (or
// value) heads.
func (c Config) qDim() int  { return c.Heads * c.HeadDim }
func (c Config) kvDim() int { return c.KVHeads * c.HeadDim }
