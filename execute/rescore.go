package execute

import (
	"context"
	"fmt"
	"sync"

	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/ui"
)

// Rescorer is t1 ui's trainer view: a chunk scored by the reference
// model of the policy version that sampled it, loaded from the run's
// lineage as the trainer loads it. It keeps the last policy it loaded,
// since a page scores every chunk of one attempt.
type Rescorer struct {
	Log   *engine.Log
	Store store.ObjectStore

	mu     sync.Mutex
	prefix string
	model  *moe.Model
}

// Rescore runs the policy's forward pass over c twice: with the
// sampler's routing replayed (the log-probs an update's ratio starts
// from) and with the router choosing (the routing of a replay-off
// update).
func (r *Rescorer) Rescore(ctx context.Context, run string, version int64, c ui.Chunk) (*ui.Rescored, error) {
	if len(c.IDs) < 2 {
		return nil, fmt.Errorf("rescore: a chunk of %d tokens predicts nothing", len(c.IDs))
	}
	runs, err := r.Log.Lineage(ctx, run)
	if err != nil {
		return nil, err
	}
	prefix, err := checkpoint.EnsurePolicy(ctx, r.Store, runs, version, nil)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prefix != prefix {
		ck, err := checkpoint.LoadPolicy(ctx, r.Store, prefix)
		if err != nil {
			return nil, err
		}
		r.prefix, r.model = prefix, ck.Model
	}
	ids := make([]int, len(c.IDs))
	for i, id := range c.IDs {
		ids[i] = int(id)
	}
	opt := moe.ForwardOptions{Temperature: float64(c.Temperature)}
	live, err := r.model.Forward(ids, opt)
	if err != nil {
		return nil, fmt.Errorf("rescore: policy %d: %w", version, err)
	}
	replayed := live
	if c.Routing != nil {
		// The sampler's [T−1] rows, as the trainer replays them.
		n := min(c.Routing.Tokens, len(ids)-1)
		rt := moe.NewRouting(n, c.Routing.Layers, c.Routing.TopK)
		for t := range n {
			for l := range rt.Layers {
				set := rt.At(t, l)
				for j := range set {
					set[j] = int32(c.Routing.At(t, l, j))
				}
			}
		}
		opt.Replay = &rt
		if replayed, err = r.model.Forward(ids, opt); err != nil {
			return nil, fmt.Errorf("rescore: policy %d with the sampler's routing: %w", version, err)
		}
	}
	out := &ui.Rescored{LogProbs: make([]float32, len(ids))}
	copy(out.LogProbs[1:], replayed.LogProbs)
	lr := live.LiveRouting
	if out.Live, err = routing.NewRecord(lr.Tokens, lr.Layers, lr.TopK, r.model.Cfg.Experts); err != nil {
		return nil, err
	}
	for t := range lr.Tokens {
		for l := range lr.Layers {
			set := lr.At(t, l)
			ints := make([]int, len(set))
			for j, e := range set {
				ints[j] = int(e)
			}
			if err := out.Live.Set(t, l, ints); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
