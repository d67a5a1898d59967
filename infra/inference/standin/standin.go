// Package standin holds HTTP stand-ins for the real inference servers t1
// talks to, as strict as those servers: an SGLang 0.5.23 /generate server
// and a vLLM /v1/completions server in its 0.21.0 or 0.34.0 form. They
// answer with the field names, encodings, status codes and error bodies
// the real servers use (read from their source at those versions; each
// behaviour cites its file), and compute the tokens, log-probs and routed
// experts with t1's own engine (moe.Sampler at f32 over a small
// Qwen3-MoE), so the values are the model's. Tests only.
package standin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"

	"github.com/t1pipe/t1/moe"
)

// policy is the model a stand-in serves.
type policy struct {
	m       *moe.Model
	sampler *moe.Sampler
	path    string
}

func newPolicy(m *moe.Model, path string) *policy {
	return &policy{m: m, sampler: moe.NewSampler(m, moe.F32), path: path}
}

// Loader reads the weights at a path the engine was told to load.
type Loader func(path string) (*moe.Model, error)

// LoadDir is the default Loader: a checkpoint directory (moe.SaveDir).
func LoadDir(path string) (*moe.Model, error) {
	ck, err := moe.LoadDir(path)
	if err != nil {
		return nil, err
	}
	return ck.Model, nil
}

// engine is the state both stand-ins share: the served model, the weight
// version and the model the server started with (a restart goes back to
// it).
type engine struct {
	mu       sync.Mutex
	initial  *policy
	cur      *policy
	version  string
	load     Loader
	requests int
}

func newEngine(m *moe.Model, load Loader) *engine {
	if load == nil {
		load = LoadDir
	}
	p := newPolicy(m, "initial")
	// SGLang 0.5.23 server_args.py: weight_version defaults to "default";
	// vLLM 0.34.0 /weight_info reads "default" until a version is set.
	return &engine{initial: p, cur: p, version: "default", load: load}
}

func (e *engine) snapshot() (*policy, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests++
	return e.cur, e.version
}

// restart is a server restart: the weights it was started with, weight
// version "default".
func (e *engine) restart() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cur, e.version = e.initial, "default"
}

// generation is one sampled completion with everything either server may
// report about it.
type generation struct {
	out     []int
	finish  string // moe.FinishStop or moe.FinishLength
	matched int    // the stop token, or -1
	// processed: log-probs of the distribution sampled from (temperature,
	// then top-p truncation and renormalisation), vLLM's processed_logprobs.
	processed []float32
	// tempered: after temperature, before top-p (SGLang's default).
	tempered []float32
	// raw: the model's log-softmax before any processor (vLLM's default
	// raw_logprobs).
	raw []float32
	// routing is [prompt+out−1, L, K], each set in the router's order:
	// descending router probability (byScore).
	routing moe.Routing
}

func (p *policy) generate(ctx context.Context, prompt []int, sp moe.SamplingParams) (*generation, error) {
	g, err := p.sampler.Generate(ctx, prompt, sp)
	if err != nil {
		return nil, err
	}
	gen := &generation{out: g.OutputIDs, finish: g.FinishReason, matched: g.MatchedStop, processed: g.LogProbs}
	gen.routing = moe.Routing{Tokens: g.Routing.Tokens, Layers: g.Routing.Layers, TopK: g.Routing.TopK, Experts: slices.Clone(g.Routing.Experts)}
	ids := append(slices.Clone(prompt), g.OutputIDs...)
	if gen.routing.Tokens == 0 {
		return gen, nil
	}
	// At f32 the sampler reproduces Model.Forward bit for bit: its sets are
	// this pass's live routing, and its log-probs this pass's.
	pass, err := p.m.Forward(ids, moe.ForwardOptions{Temperature: 1})
	if err != nil {
		return nil, err
	}
	byScore(gen.routing, pass)
	if len(g.OutputIDs) == 0 {
		return gen, nil
	}
	gen.raw = slices.Clone(pass.LogProbs[len(prompt)-1:])
	gen.tempered = gen.raw
	if sp.Temperature != 0 && sp.Temperature != 1 {
		tp, err := p.m.Forward(ids, moe.ForwardOptions{Temperature: sp.Temperature})
		if err != nil {
			return nil, err
		}
		gen.tempered = slices.Clone(tp.LogProbs[len(prompt)-1:])
	}
	return gen, nil
}

// byScore puts every (token, layer) set of r in the order the servers
// report it: descending router probability, ties to the lower id.
// Neither server sorts what its router returns. SGLang 0.5.23 copies
// topk_ids into the routed-experts capturer as select_experts produced
// them (python/sglang/srt/layers/moe/topk.py _post_process_topk_ids;
// routed_experts_capturer.py capture), and for a Qwen3-MoE select_experts
// is fused_topk → sgl_kernel topk_softmax
// (sgl-kernel/csrc/moe/moe_topk_softmax_kernels.cu topkGatingSoftmax,
// moeTopK): its k-th pass writes the k-th arg-max, the lower index
// winning a tie. The torch-native path is torch.topk, sorted=True by
// default; topk(sorted=False) is only on the grouped and biased paths
// (DeepSeek's). vLLM 0.21.0 and 0.34.0 capture in BaseRouter.select_experts
// (vllm/model_executor/layers/fused_moe/router/base_router.py, before
// the EPLB mapping; routed_experts_capturer.py capture, a plain copy)
// what fused_topk → ops.topk_softmax wrote (csrc/moe/topk_softmax_kernels.cu,
// the same TensorRT-LLM kernel). No source promises this order, which is
// why the clients sort; the kernels give it all the same. r's sets are
// pass's live routing (at f32 the sampler is Model.Forward), so ranking
// them by its probabilities is the router's own order.
func byScore(r moe.Routing, pass *moe.Pass) {
	for l := range r.Layers {
		probs := pass.RouterProbs(l)
		E := len(probs) / len(pass.IDs)
		for t := range r.Tokens {
			row := probs[t*E : (t+1)*E]
			slices.SortFunc(r.At(t, l), func(a, b int32) int {
				if c := cmp.Compare(row[b], row[a]); c != 0 {
					return c
				}
				return cmp.Compare(a, b)
			})
		}
	}
}

// randomSeed is the seed of a request that did not fix one.
func randomSeed() uint64 { return rand.Uint64() }

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// int64Of reads a JSON integer that must fit in int64 (Python's ints are
// unbounded: the range check is the server's).
func int64Of(n json.Number) (int64, bool, error) {
	var f big
	if err := f.parse(string(n)); err != nil {
		return 0, false, err
	}
	return f.v, f.ok, nil
}

// big parses a decimal integer, noting whether it fits in int64.
type big struct {
	v  int64
	ok bool
}

func (b *big) parse(s string) error {
	neg := false
	if s != "" && s[0] == '-' {
		neg, s = true, s[1:]
	}
	if s == "" {
		return fmt.Errorf("not an integer")
	}
	var u uint64
	over := false
	for _, c := range s {
		if c < '0' || c > '9' {
			return fmt.Errorf("%q is not an integer", s)
		}
		d := uint64(c - '0')
		if u > (math.MaxUint64-d)/10 {
			over = true
			continue
		}
		u = u*10 + d
	}
	switch {
	case over:
		b.ok = false
	case neg && u <= 1<<63:
		b.v, b.ok = int64(-u), true // -(1<<63) wraps to MinInt64
	case !neg && u <= math.MaxInt64:
		b.v, b.ok = int64(u), true
	}
	return nil
}
