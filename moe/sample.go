package moe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// SamplingParams control one generation.
type SamplingParams struct {
	// Temperature divides the logits; 0 samples greedily (argmax, ties to
	// the lower id).
	Temperature float64
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP (ties by lower id), then renormalises; 0 or 1 keeps all.
	TopP float64
	// MaxNewTokens bounds the generated tokens; generation also stops at
	// the model's context.
	MaxNewTokens int
	// StopTokenIDs end generation when sampled; the stop token is included
	// in the output.
	StopTokenIDs []int
	// Seed makes sampling deterministic: same weights, prompt, params and
	// seed give the same ids, log-probs and routing.
	Seed uint64
}

// Finish reasons.
const (
	FinishStop   = "stop"   // a stop token was sampled
	FinishLength = "length" // MaxNewTokens or the context was reached
)

// Generation is what the serving path returns for one prompt.
type Generation struct {
	OutputIDs []int
	// LogProbs[i] is the log-probability of OutputIDs[i] under the
	// distribution it was sampled from: logits/temperature, truncated to
	// top-p and renormalised (what SGLang returns by default). Greedy
	// sampling reports the temperature-1 log-softmax. With temperature 1
	// and top_p 1 this is the model's own log-prob, which the trainer
	// recomputes.
	LogProbs []float32
	// Routing holds the experts of every processed token, prompt and
	// generated: [len(prompt)+len(OutputIDs)−1, layers, top_k].
	Routing      Routing
	FinishReason string
	// MatchedStop is the stop token that ended generation, or −1.
	MatchedStop int
}

// Sampler is the serving path: KV-cached incremental decoding over a
// snapshot of a model's weights at a serving precision. With BF16 the
// weights, and every matmul input and output, are rounded to bfloat16, so
// routing and log-probs differ from the float32 trainer the way a bf16
// engine's do; with F32 it reproduces Model.Forward bit for bit. A Sampler
// is immutable and safe for concurrent Generate calls.
type Sampler struct {
	cfg   Config
	prec  Precision
	w     *Weights
	wt    *weightsT // w's matrices transposed, as gemm reads them
	rope  ropeTable
	cache *prefixCache
}

// DefaultPrefixCache is how many recent sequences a new Sampler keeps for
// prefix reuse (about 2 MB each at the default config's full context).
const DefaultPrefixCache = 16

// NewSampler snapshots m's weights at precision p; later training of m does
// not affect it. m must be a policy.
func NewSampler(m *Model, p Precision) *Sampler {
	if m.Head != LMHead {
		panic("moe: a sampler needs a policy (LM head), not a critic")
	}
	w := newWeights(m.Cfg, LMHead)
	for i, t := range m.W.Tensors {
		copy(w.Tensors[i].Data, t.Data)
		p.round(w.Tensors[i].Data)
	}
	return &Sampler{cfg: m.Cfg, prec: p, w: w, wt: transposeWeights(w, m.Cfg, true, false), rope: m.rope, cache: &prefixCache{max: DefaultPrefixCache}}
}

// SetPrefixCache sets how many recent sequences are kept for prefix reuse
// (0 disables it) and empties the cache. Reuse never changes results.
func (s *Sampler) SetPrefixCache(n int) {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	s.cache.max, s.cache.entries = max(n, 0), nil
}

// PrefixCacheHits is the number of prompt tokens served from the cache.
func (s *Sampler) PrefixCacheHits() uint64 {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	return s.cache.hits
}

// Config returns the model shape.
func (s *Sampler) Config() Config { return s.cfg }

// Precision returns the serving precision.
func (s *Sampler) Precision() Precision { return s.prec }

// kvState is one generation's cache and scratch. Keys are kept
// transposed (kt[l] is [Hkv, capacity]), so that one query's scores are a
// gemm row over positions; values are rows (v[l] is [capacity, Hkv]).
type kvState struct {
	capacity              int
	kt, v                 [][]float32
	x, a, x2              []float32
	att                   attnAct
	xout, xf, logits, rms []float32
	moe                   *moeAct
	scores                []float32
}

// Generate samples up to sp.MaxNewTokens tokens after prompt.
func (s *Sampler) Generate(ctx context.Context, prompt []int, sp SamplingParams) (*Generation, error) {
	cfg := s.cfg
	n := len(prompt)
	if n == 0 {
		return nil, errors.New("moe generate: empty prompt")
	}
	if n > cfg.Context {
		return nil, fmt.Errorf("moe generate: prompt of %d tokens exceeds the context of %d", n, cfg.Context)
	}
	for i, id := range prompt {
		if id < 0 || id >= cfg.Vocab {
			return nil, fmt.Errorf("moe generate: prompt token %d: id %d outside the vocabulary [0,%d)", i, id, cfg.Vocab)
		}
	}
	if sp.MaxNewTokens < 0 {
		return nil, fmt.Errorf("moe generate: max_new_tokens %d is negative", sp.MaxNewTokens)
	}
	if sp.Temperature < 0 || math.IsNaN(sp.Temperature) {
		return nil, fmt.Errorf("moe generate: temperature %g is negative", sp.Temperature)
	}
	if sp.TopP < 0 || sp.TopP > 1 || math.IsNaN(sp.TopP) {
		return nil, fmt.Errorf("moe generate: top_p %g outside [0,1]", sp.TopP)
	}
	total := min(n+sp.MaxNewTokens, cfg.Context)
	D, K, L, dkv := cfg.DModel, cfg.TopK, cfg.Layers, cfg.kvDim()
	f := func(k int) []float32 { return make([]float32, k) }
	st := &kvState{capacity: total, x: f(D), a: f(cfg.qDim()), x2: f(D), att: newAttnAct(cfg, 1), xout: f(D), xf: f(D),
		logits: f(cfg.Vocab), rms: f(1), moe: newMoEAct(cfg, 1), scores: f(total)}
	for l := 0; l < L; l++ {
		st.kt = append(st.kt, f(total*dkv))
		st.v = append(st.v, f(total*dkv))
	}
	rng := rand.New(rand.NewPCG(sp.Seed, 0x73616d706c65))
	g := &Generation{MatchedStop: -1, FinishReason: FinishLength}
	tokens := append(make([]int, 0, total), prompt...)
	start, routing := s.cache.restore(st, prompt, dkv, L, K)
	if sp.MaxNewTokens == 0 || n == cfg.Context {
		// Nothing to generate; still report the prompt's routing.
		for pos := start; pos < n-1; pos++ {
			routing = s.step(st, tokens[pos], pos, routing)
		}
		g.Routing = Routing{Tokens: n - 1, Layers: L, TopK: K, Experts: routing}
		s.cache.store(st, tokens[:n-1], routing, dkv, L, K)
		return g, nil
	}
	for pos := start; ; pos++ {
		if pos%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("moe generate: %w", err)
			}
		}
		routing = s.step(st, tokens[pos], pos, routing)
		if pos < n-1 {
			continue
		}
		finalNorm(cfg, s.w, s.prec, 1, st.x, st.xf, st.rms, false)
		lmHead(s.wt, s.prec, 1, st.xf, st.logits, D)
		id, lp := sample(st.logits, sp, rng)
		g.OutputIDs = append(g.OutputIDs, id)
		g.LogProbs = append(g.LogProbs, lp)
		tokens = append(tokens, id)
		if slices.Contains(sp.StopTokenIDs, id) {
			g.FinishReason, g.MatchedStop = FinishStop, id
			break
		}
		if len(tokens) >= total {
			break
		}
	}
	rows := len(tokens) - 1
	g.Routing = Routing{Tokens: rows, Layers: L, TopK: K, Experts: routing[:rows*L*K]}
	s.cache.store(st, tokens[:rows], routing, dkv, L, K)
	return g, nil
}

// step runs token id at position pos through every block, leaving the
// final residual in st.x and appending its routing.
func (s *Sampler) step(st *kvState, id, pos int, routing []int32) []int32 {
	cfg := s.cfg
	D, dkv := cfg.DModel, cfg.kvDim()
	copy(st.x, s.w.Embed[id*D:(id+1)*D])
	for l := range s.w.Layers {
		lw, lt := &s.w.Layers[l], &s.wt.layers[l]
		attnIn(cfg, lw, lt, s.rope, s.prec, pos, 1, st.x, &st.att, st.v[l][pos*dkv:(pos+1)*dkv], false)
		kt := st.kt[l]
		for d, v := range st.att.k {
			kt[d*st.capacity+pos] = v
		}
		attendOne(st.a, st.att.q, kt, st.v[l], pos, st.capacity, cfg, st.scores)
		attnOut(lt, s.prec, 1, st.a, st.x, st.x2, false)
		moeForward(cfg, lw, lt, s.prec, 1, st.x2, nil, 0, st.moe, st.xout, false)
		routing = append(routing, st.moe.sel...)
		st.x, st.xout = st.xout, st.x
	}
	return routing
}

// sample draws one token from logits under sp and returns it with its
// log-probability under the distribution it was drawn from.
func sample(logits []float32, sp SamplingParams, rng *rand.Rand) (int, float32) {
	if sp.Temperature == 0 {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		return best, logSoftmaxAt(logits, best)
	}
	mx := logits[0]
	for _, v := range logits[1:] {
		mx = max(mx, v)
	}
	p := make([]float64, len(logits))
	var sum float64
	for i, v := range logits {
		p[i] = math.Exp(float64(v-mx) / sp.Temperature)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	order := make([]int, len(p))
	for i := range order {
		order[i] = i
	}
	mass := 1.0
	if sp.TopP > 0 && sp.TopP < 1 {
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case p[a] > p[b]:
				return -1
			case p[a] < p[b]:
				return 1
			}
			return 0
		})
		var cum float64
		for k, i := range order {
			cum += p[i]
			if cum >= sp.TopP {
				order = order[:k+1]
				break
			}
		}
		mass = 0
		for _, i := range order {
			mass += p[i]
		}
	}
	u := rng.Float64() * mass
	pick := order[len(order)-1]
	var cum float64
	for _, i := range order {
		cum += p[i]
		if u < cum {
			pick = i
			break
		}
	}
	if mass == 1 {
		// The trainer's own formula, so F32 serving matches it exactly.
		return pick, logSoftmaxAtTemp(logits, pick, sp.Temperature)
	}
	return pick, float32(math.Log(p[pick] / mass))
}
