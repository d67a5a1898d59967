package moe

import "fmt"

// Critic is a value network: the same architecture as the policy with the
// scalar value head read out at every position, and its own optimiser.
// The trainer supplies ∂L/∂value per position (e.g. the clipped value
// loss of PPO) exactly as it supplies ∂L/∂log-prob to the policy.
type Critic struct {
	Model *Model
	Opt   *Adam
}

// NewCritic initialises a critic of shape cfg from cfg.Seed.
func NewCritic(cfg Config, opt AdamConfig) (*Critic, error) {
	m, err := NewModel(cfg)
	if err != nil {
		return nil, err
	}
	return &Critic{Model: m, Opt: NewAdam(m, opt)}, nil
}

// Values returns the value at every position of ids. Routing is live:
// the critic is never sampled from, so it has no served routing to
// replay.
func (c *Critic) Values(ids []int) ([]float32, error) {
	p, err := c.Model.Forward(ids, ForwardOptions{})
	if err != nil {
		return nil, fmt.Errorf("critic: %w", err)
	}
	return p.Values, nil
}

// Forward runs the critic and keeps the pass for Backward.
func (c *Critic) Forward(ids []int) (*Pass, error) { return c.Model.Forward(ids, ForwardOptions{}) }

// Backward accumulates the critic's gradients from ∂L/∂values.
func (c *Critic) Backward(p *Pass, dValues []float32) error {
	if dValues == nil {
		return fmt.Errorf("critic backward: no value gradients")
	}
	return c.Model.Backward(p, nil, dValues)
}

// Step clips the gradient norm to maxNorm (0: no clipping), applies Adam
// and clears the gradients; it returns the norm before clipping.
func (c *Critic) Step(maxNorm float64) float64 {
	n := c.Model.ClipGradNorm(maxNorm)
	c.Opt.Step()
	c.Model.ZeroGrad()
	return n
}
