package ui

import (
	"context"

	"github.com/t1pipe/t1/schemas/routing"
)

// Rescorer scores a chunk of an attempt with the policy that sampled it,
// as the trainer's first forward pass over the chunk does: what the
// sampler-vs-trainer gap and the routing a replay-off update would take
// are measured against. The viewer asks only when a page shows them.
type Rescorer interface {
	Rescore(ctx context.Context, run string, version int64, c Chunk) (*Rescored, error)
}

// Chunk is one training sequence as sampled.
type Chunk struct {
	IDs         []int32
	Temperature float32
	// Routing is the sampler's, replayed for Rescored.LogProbs; nil
	// scores with the router's own choice.
	Routing *routing.Record
}

// Rescored is the trainer's view of a chunk.
type Rescored struct {
	// LogProbs[t] is log p(IDs[t] | IDs[:t]) with the sampler's routing
	// replayed (0 at t = 0, which nothing predicts).
	LogProbs []float32
	// Live is the experts the router chose itself at every token and
	// layer: a replay-off update's routing.
	Live *routing.Record
}
