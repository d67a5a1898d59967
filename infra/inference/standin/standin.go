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
	// routing is [prompt+out−1, L, K], each set in the router's order
	// (the stand-in gives descending ids: never ascending, as SGLang's
	// topk(sorted=False) and vLLM's kernels need not be).
	routing moe.Routing
}

func (p *policy) generate(ctx context.Context, prompt []int, sp moe.SamplingParams) (*generation, error) {
	g, err := p.sampler.Generate(ctx, prompt, sp)
	if err != nil {
		return nil, err
	}
	gen := &generation{out: g.OutputIDs, finish: g.FinishReason, matched: g.MatchedStop, processed: g.LogProbs}
	r := moe.Routing{Tokens: g.Routing.Tokens, Layers: g.Routing.Layers, TopK: g.Routing.TopK, Experts: slices.Clone(g.Routing.Experts)}
	for t := range r.Tokens {
		for l := range r.Layers {
			slices.Reverse(r.At(t, l))
		}
	}
	gen.routing = r
	if len(g.OutputIDs) > 0 {
		ids := append(slices.Clone(prompt), g.OutputIDs...)
		// At f32 the sampler reproduces Model.Forward bit for bit.
		at := func(temp float64) ([]float32, error) {
			pass, err := p.m.Forward(ids, moe.ForwardOptions{Temperature: temp})
			if err != nil {
				return nil, err
			}
			return slices.Clone(pass.LogProbs[len(prompt)-1:]), nil
		}
		if gen.raw, err = at(1); err != nil {
			return nil, err
		}
		if sp.Temperature == 0 {
			gen.tempered = gen.raw
		} else if gen.tempered, err = at(sp.Temperature); err != nil {
			return nil, err
		}
	}
	return gen, nil
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
