package moe

import (
	"fmt"
	"strings"
)

// Config is a model's shape (config.json in a checkpoint).
type Config struct {
	Vocab   int    `json:"vocab"`   // token ids, including specials
	Layers  int    `json:"layers"`  // transformer blocks, each with an MoE feed-forward
	DModel  int    `json:"d_model"` // residual width
	Heads   int    `json:"heads"`   // attention heads; d_model/heads must be even (RoPE pairs)
	Experts int    `json:"experts"` // routed experts per layer
	TopK    int    `json:"top_k"`   // experts each token uses
	DFF     int    `json:"d_ff"`    // hidden width of one expert (SwiGLU)
	Context int    `json:"context"` // longest sequence, prompt plus generated
	Seed    uint64 `json:"seed"`    // initialisation seed
	// RopeTheta is the RoPE base; 0 means 10000.
	RopeTheta float64 `json:"rope_theta,omitempty"`
}

// DefaultConfig is small enough that rollouts, critic and PPO of a whole
// pipeline run in minutes on two cores.
func DefaultConfig() Config {
	return Config{Vocab: 512, Layers: 2, DModel: 64, Heads: 4, Experts: 8, TopK: 2, DFF: 128, Context: 2048, Seed: 1}
}

// Validate reports the first field that makes the shape unusable.
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
	pos("experts", c.Experts)
	pos("top_k", c.TopK)
	pos("d_ff", c.DFF)
	pos("context", c.Context)
	if c.Heads > 0 && c.DModel > 0 && (c.DModel%c.Heads != 0 || (c.DModel/c.Heads)%2 != 0) {
		bad = append(bad, fmt.Sprintf("d_model %d must be a multiple of heads %d with an even head size", c.DModel, c.Heads))
	}
	if c.TopK > c.Experts {
		bad = append(bad, fmt.Sprintf("top_k %d exceeds experts %d", c.TopK, c.Experts))
	}
	if c.Experts > 65535 {
		bad = append(bad, fmt.Sprintf("experts %d exceeds 65535", c.Experts))
	}
	if c.RopeTheta < 0 {
		bad = append(bad, fmt.Sprintf("rope_theta must not be negative, got %g", c.RopeTheta))
	}
	if len(bad) > 0 {
		return fmt.Errorf("moe config: %s", strings.Join(bad, "; "))
	}
	return nil
}

func (c Config) headDim() int { return c.DModel / c.Heads }

func (c Config) ropeTheta() float64 {
	if c.RopeTheta == 0 {
		return 10000
	}
	return c.RopeTheta
}
