package moe

import "fmt"

// SFTStep runs one supervised step over a batch: loss = −Σ mask·logp / N
// over every sequence's targets (N = Σ mask), i.e. ∂L/∂logp = −mask/N.
// masks[i][t] weighs target t+1 of seqs[i] (nil: all targets, weight 1).
// It clips the gradient norm to maxNorm (0: none), steps opt, clears the
// gradients and returns the mean loss before the update.
func SFTStep(m *Model, opt *Adam, seqs [][]int, masks [][]float32, maxNorm float64) (float64, error) {
	var n float64
	for i, s := range seqs {
		if len(s) < 2 {
			return 0, fmt.Errorf("sft: sequence %d has %d tokens, need 2", i, len(s))
		}
		if masks != nil && masks[i] != nil {
			if len(masks[i]) != len(s)-1 {
				return 0, fmt.Errorf("sft: sequence %d: mask of %d for %d targets", i, len(masks[i]), len(s)-1)
			}
			for _, w := range masks[i] {
				n += float64(w)
			}
		} else {
			n += float64(len(s) - 1)
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("sft: every mask is zero")
	}
	var loss float64
	for i, s := range seqs {
		p, err := m.Forward(s, ForwardOptions{})
		if err != nil {
			return 0, fmt.Errorf("sft: sequence %d: %w", i, err)
		}
		d := make([]float32, len(s)-1)
		for t := range d {
			w := float32(1)
			if masks != nil && masks[i] != nil {
				w = masks[i][t]
			}
			d[t] = -w / float32(n)
			loss -= float64(w) * float64(p.LogProbs[t]) / n
		}
		if err := m.Backward(p, d, nil); err != nil {
			return 0, err
		}
	}
	m.ClipGradNorm(maxNorm)
	opt.Step()
	m.ZeroGrad()
	return loss, nil
}
