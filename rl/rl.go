package rl

import (
	"errors"
	"fmt"
	"math"
)

// Chunk is one training sequence of an attempt as GAE sees it: the loss
// mask and the pre-update value of each token (see the package doc for
// the alignment).
type Chunk struct {
	Loss   []bool
	Values []float32
}

// GAE computes advantages and returns for one attempt whose chunks are
// given in order, with the attempt's reward at its last action. The
// outputs have one slice per chunk, aligned with the tokens; entries of
// non-action tokens are 0. An attempt with no action gets all zeros.
func GAE(chunks []Chunk, reward, gamma, lambda float64) (adv, ret [][]float32, err error) {
	if !(gamma >= 0 && gamma <= 1 && lambda >= 0 && lambda <= 1) { // also refuses NaN
		return nil, nil, fmt.Errorf("gae: gamma %g and lambda %g must lie in [0, 1]", gamma, lambda)
	}
	if math.IsNaN(reward) || math.IsInf(reward, 0) {
		return nil, nil, fmt.Errorf("gae: reward %g", reward)
	}
	type pos struct{ c, t int }
	var steps []pos
	for c, ch := range chunks {
		if len(ch.Loss) != len(ch.Values) {
			return nil, nil, fmt.Errorf("gae: chunk %d has %d mask entries and %d values", c, len(ch.Loss), len(ch.Values))
		}
		for t, l := range ch.Loss {
			if l {
				steps = append(steps, pos{c, t})
			}
		}
	}
	adv = make([][]float32, len(chunks))
	ret = make([][]float32, len(chunks))
	for c, ch := range chunks {
		adv[c] = make([]float32, len(ch.Loss))
		ret[c] = make([]float32, len(ch.Loss))
	}
	var next, a float64 // V_{i+1}, A_{i+1}
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		v := float64(chunks[s.c].Values[s.t])
		r := 0.0
		if i == len(steps)-1 {
			r = reward
		}
		delta := r + gamma*next - v
		a = delta + gamma*lambda*a
		adv[s.c][s.t] = float32(a)
		ret[s.c][s.t] = float32(a + v)
		next = v
	}
	return adv, ret, nil
}

// ActionValues maps a critic forward pass's score head (length T, position t is
// the state after token t) to per-token action values: entry t is
// values[t−1] where loss[t] is set, else 0.
func ActionValues(loss []bool, values []float32) ([]float32, error) {
	if len(values) != len(loss) {
		return nil, fmt.Errorf("action values: %d values for %d tokens", len(values), len(loss))
	}
	out := make([]float32, len(loss))
	for t, l := range loss {
		if l {
			if t == 0 {
				return nil, errors.New("action values: token 0 is marked as an action, but nothing predicts it")
			}
			out[t] = values[t-1]
		}
	}
	return out, nil
}

// ActionLogProbs maps a pass's LogProbs (length T−1, entry t predicts
// token t+1) to per-token action log-probs, 0 outside the loss mask.
func ActionLogProbs(loss []bool, logProbs []float32) ([]float32, error) {
	if len(logProbs) != len(loss)-1 {
		return nil, fmt.Errorf("action log-probs: %d log-probs for %d tokens", len(logProbs), len(loss))
	}
	out := make([]float32, len(loss))
	for t, l := range loss {
		if l {
			if t == 0 {
				return nil, errors.New("action log-probs: token 0 is marked as an action, but nothing predicts it")
			}
			out[t] = logProbs[t-1]
		}
	}
	return out, nil
}

// PolicyStats accumulates the clipped surrogate over the actions of a
// batch. Add each chunk, then read the means.
type PolicyStats struct {
	Tokens  int     // actions seen
	Loss    float64 // Σ −min(ρA, clip(ρ)A)
	Clipped int     // actions with |ρ − 1| > ε
	KL      float64 // Σ (ρ − 1) − log ρ, the k3 estimator of KL(old‖new)
}

// AddKL adds one chunk's actions to the KL estimate alone: oldLP and
// newLP are two policies' log-probs of the same tokens.
func (s *PolicyStats) AddKL(loss []bool, oldLP, newLP []float32) {
	for t, l := range loss {
		if l {
			s.Tokens++
			s.KL += k3(float64(newLP[t]) - float64(oldLP[t]))
		}
	}
}

// k3 is the estimate (ρ − 1) − log ρ of KL(old ‖ new) from one action's
// log ρ = log new − log old.
func k3(logRatio float64) float64 { return math.Exp(logRatio) - 1 - logRatio }

// MeanLoss is the token-level mean surrogate loss.
func (s PolicyStats) MeanLoss() float64 { return div(s.Loss, s.Tokens) }

// ClipFraction is the fraction of actions whose ratio left [1−ε, 1+ε].
func (s PolicyStats) ClipFraction() float64 { return div(float64(s.Clipped), float64(s.Tokens)) }

// ApproxKL is the mean k3 estimate of KL(old ‖ new).
func (s PolicyStats) ApproxKL() float64 { return div(s.KL, s.Tokens) }

func div[T int | float64](a float64, n T) float64 {
	if n == 0 {
		return 0
	}
	return a / float64(n)
}

// PolicyGrad adds one chunk's actions to s and returns ∂L/∂logp_t of the
// token-level loss L = −1/n Σ min(ρ_t A_t, clip(ρ_t, 1−ε, 1+ε) A_t), where
// n is the number of actions in the whole batch (so per-chunk gradients
// add up to the batch's). All slices are per token (package doc). The
// gradient is ρ_t A_t / −n where the unclipped term is the minimum and 0
// where clipping holds the term constant.
func PolicyGrad(s *PolicyStats, loss []bool, newLP, oldLP, adv []float32, eps float64, n int) ([]float32, error) {
	return DecoupledPolicyGrad(s, loss, newLP, oldLP, adv, nil, eps, n)
}

// DecoupledPolicyGrad is PolicyGrad with every action's term weighted by
// w_t, the truncated importance weight of the proximal policy (oldLP, the
// trainer's own before the update) over the behaviour policy that
// sampled the action (BehaviourWeights): L = −1/n Σ w_t min(ρ_t A_t,
// clip(ρ_t) A_t), the decoupled objective of asynchronous PPO, where the
// clip keeps the update near the proximal policy and w corrects for the
// older one that played. w is data, not differentiated; nil is all 1.
func DecoupledPolicyGrad(s *PolicyStats, loss []bool, newLP, oldLP, adv, w []float32, eps float64, n int) ([]float32, error) {
	if len(newLP) != len(loss) || len(oldLP) != len(loss) || len(adv) != len(loss) || (w != nil && len(w) != len(loss)) {
		return nil, fmt.Errorf("policy loss: %d tokens, %d new log-probs, %d old, %d advantages, %d weights", len(loss), len(newLP), len(oldLP), len(adv), len(w))
	}
	if n <= 0 {
		return nil, fmt.Errorf("policy loss: batch of %d actions", n)
	}
	g := make([]float32, len(loss))
	for t, l := range loss {
		if !l {
			continue
		}
		logRatio := float64(newLP[t]) - float64(oldLP[t])
		rho := math.Exp(logRatio)
		a := float64(adv[t])
		unclipped := rho * a
		clipped := math.Max(1-eps, math.Min(1+eps, rho)) * a
		weight := 1.0
		if w != nil {
			weight = float64(w[t])
		}
		s.Tokens++
		s.Loss -= weight * math.Min(unclipped, clipped)
		s.KL += k3(logRatio)
		if rho < 1-eps || rho > 1+eps {
			s.Clipped++
		}
		if unclipped <= clipped {
			g[t] = float32(-weight * unclipped / float64(n))
		}
	}
	return g, nil
}

// BehaviourStats describe how far the behaviour policy that sampled a
// batch is from the proximal one that trains it.
type BehaviourStats struct {
	Tokens    int     // actions seen
	KL        float64 // Σ k3 estimate of KL(behaviour ‖ proximal)
	Truncated int     // actions whose weight the cap cut
}

// KLMean is the mean k3 estimate of KL(behaviour ‖ proximal).
func (s BehaviourStats) KLMean() float64 { return div(s.KL, s.Tokens) }

// TruncatedFraction is the fraction of actions whose weight was cut.
func (s BehaviourStats) TruncatedFraction() float64 {
	return div(float64(s.Truncated), float64(s.Tokens))
}

// BehaviourWeights returns, per token, the importance weight
// min(π_prox/π_behaviour, limit) of every action (0 elsewhere): prox are
// the proximal policy's log-probs, behaviour the sampler's. Truncating
// keeps a stale action the behaviour policy found unlikely from
// dominating the step (truncated importance sampling); limit must be
// positive.
func BehaviourWeights(s *BehaviourStats, loss []bool, prox, behaviour []float32, limit float64) ([]float32, error) {
	if len(prox) != len(loss) || len(behaviour) != len(loss) {
		return nil, fmt.Errorf("behaviour weights: %d tokens, %d proximal log-probs, %d behaviour", len(loss), len(prox), len(behaviour))
	}
	if !(limit > 0) {
		return nil, fmt.Errorf("behaviour weights: cap %v is not positive", limit)
	}
	w := make([]float32, len(loss))
	for t, l := range loss {
		if !l {
			continue
		}
		logRatio := float64(prox[t]) - float64(behaviour[t])
		r := math.Exp(logRatio)
		s.Tokens++
		s.KL += k3(logRatio)
		if r > limit {
			r = limit
			s.Truncated++
		}
		w[t] = float32(r)
	}
	return w, nil
}

// ValueStats accumulates the clipped value loss over a batch.
type ValueStats struct {
	Tokens int
	Loss   float64
}

// MeanLoss is the token-level mean value loss.
func (s ValueStats) MeanLoss() float64 { return div(s.Loss, s.Tokens) }

// ValueGrad adds one chunk's actions to s and returns ∂L/∂V_t of
// L = 1/n Σ ½ max((V_t − G_t)², (clip(V_t, V_old_t − c, V_old_t + c) − G_t)²),
// the value loss clipped around the pre-update values V_old; c ≤ 0
// disables clipping.
func ValueGrad(s *ValueStats, loss []bool, v, vOld, ret []float32, c float64, n int) ([]float32, error) {
	if len(v) != len(loss) || len(vOld) != len(loss) || len(ret) != len(loss) {
		return nil, fmt.Errorf("value loss: %d tokens, %d values, %d pre-update values, %d returns", len(loss), len(v), len(vOld), len(ret))
	}
	if n <= 0 {
		return nil, fmt.Errorf("value loss: batch of %d actions", n)
	}
	g := make([]float32, len(loss))
	for t, l := range loss {
		if !l {
			continue
		}
		x, g0 := float64(v[t]), float64(ret[t])
		lu := 0.5 * (x - g0) * (x - g0)
		s.Tokens++
		if c <= 0 {
			s.Loss += lu
			g[t] = float32((x - g0) / float64(n))
			continue
		}
		old := float64(vOld[t])
		xc := math.Max(old-c, math.Min(old+c, x))
		lc := 0.5 * (xc - g0) * (xc - g0)
		if lu >= lc {
			s.Loss += lu
			g[t] = float32((x - g0) / float64(n))
		} else {
			// The clipped term is larger, so x lies outside the band and
			// the term does not depend on it.
			s.Loss += lc
		}
	}
	return g, nil
}

// Moments accumulates the figures explained variance needs.
type Moments struct {
	n                      int
	sumY, sumY2, sumR, sR2 float64
}

// Add records the targets y and predictions p at the actions of a chunk.
func (m *Moments) Add(loss []bool, y, p []float32) {
	for t, l := range loss {
		if l {
			r := float64(y[t]) - float64(p[t])
			m.n++
			m.sumY += float64(y[t])
			m.sumY2 += float64(y[t]) * float64(y[t])
			m.sumR += r
			m.sR2 += r * r
		}
	}
}

// ExplainedVariance is 1 − Var(y − p)/Var(y): 1 for a perfect critic, 0
// for one that predicts the mean, negative for worse. It is 0 when the
// targets have no variance (nothing to explain) or there are no actions.
func (m *Moments) ExplainedVariance() float64 {
	if m.n == 0 {
		return 0
	}
	n := float64(m.n)
	vy := m.sumY2/n - (m.sumY/n)*(m.sumY/n)
	vr := m.sR2/n - (m.sumR/n)*(m.sumR/n)
	if vy <= 1e-12 {
		return 0
	}
	return 1 - vr/vy
}

// GapStats accumulates the masked, token-weighted mean |Δ log-prob|
// between the trainer and the sampler.
type GapStats struct {
	Tokens int
	Sum    float64
	Max    float64
}

// Add records the actions of one chunk: train and sampled are per token.
func (g *GapStats) Add(loss []bool, train, sampled []float32) {
	for t, l := range loss {
		if l {
			d := math.Abs(float64(train[t]) - float64(sampled[t]))
			g.Tokens++
			g.Sum += d
			g.Max = max(g.Max, d)
		}
	}
}

// Mean is the mean absolute gap over every action added.
func (g GapStats) Mean() float64 { return div(g.Sum, g.Tokens) }

// Mismatch counts (token, layer) expert sets that differ between the
// routing the sampler recorded and the routing a training forward used.
type Mismatch struct {
	Mismatches, Sets int
}

// Add records one chunk's comparison: mismatches of its sets differ (the
// model's routing comparison counts them, e.g. moe.CompareRouting).
func (m *Mismatch) Add(mismatches, sets int) {
	m.Mismatches += mismatches
	m.Sets += sets
}

// Rate is the fraction of sets that differ.
func (m Mismatch) Rate() float64 { return div(float64(m.Mismatches), float64(m.Sets)) }

// Whiten standardises the advantages of every action of a batch to mean 0
// and standard deviation 1, in place (per-token slices as in the package
// doc; non-action entries stay 0). It makes the size of an actor step
// independent of the reward's scale and of how good the critic is. It
// reports false, changing nothing, when the advantages do not vary (every
// action's is the same): there is no learning signal to scale.
func Whiten(loss [][]bool, adv [][]float32) (bool, error) {
	if len(loss) != len(adv) {
		return false, fmt.Errorf("whiten: %d loss masks, %d advantage slices", len(loss), len(adv))
	}
	var n int
	var sum, sq float64
	for i := range loss {
		if len(loss[i]) != len(adv[i]) {
			return false, fmt.Errorf("whiten: chunk %d: %d tokens, %d advantages", i, len(loss[i]), len(adv[i]))
		}
		for t, l := range loss[i] {
			if l {
				a := float64(adv[i][t])
				n, sum, sq = n+1, sum+a, sq+a*a
			}
		}
	}
	if n < 2 {
		return false, nil
	}
	mean := sum / float64(n)
	std := math.Sqrt(math.Max(sq/float64(n)-mean*mean, 0))
	if std < 1e-6 {
		return false, nil
	}
	for i := range loss {
		for t, l := range loss[i] {
			if l {
				adv[i][t] = float32((float64(adv[i][t]) - mean) / std)
			}
		}
	}
	return true, nil
}
