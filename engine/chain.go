package engine

import (
	"context"
	"fmt"
	"sync"
)

// Chain is the events that descend from one root event: the root, what a
// stage emits while handling an event of the chain, and what any process
// emits in reaction to one (its causation id is in the chain). It tells a
// job's work apart from the rest of its run's events, which its run-scoped
// consumers deliver too. Correlation ids cannot: an event that a stage
// emits carries its cause's, so an evaluation that a run's control asked
// for shares its correlation id with the whole of the run's training.
type Chain struct {
	mu  sync.Mutex
	ids map[string]bool
}

// ChainOf is root's chain as far as the log holds it: root's run's events
// from root's stream sequence on, each taken when its cause is in the
// chain (a cause is always stored before its effects). root is an event
// read from or published to the log, so that its Seq is set.
func (l *Log) ChainOf(ctx context.Context, root Event) (*Chain, error) {
	if root.Seq == 0 {
		return nil, fmt.Errorf("engine: chain of %s: the event has no stream sequence", root.ID)
	}
	c := &Chain{ids: map[string]bool{root.ID: true}}
	err := l.replayRun(ctx, root.Run, nil, ReplayFrom{Seq: root.Seq}, func(ev Event) error {
		c.take(ev)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("engine: chain of %s: %w", root.ID, err)
	}
	return c, nil
}

// take adds ev to the chain when it descends from it, and reports whether
// it does.
func (c *Chain) take(ev Event) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ids[ev.ID] && !(ev.CausationID != "" && c.ids[ev.CausationID]) {
		return false
	}
	c.ids[ev.ID] = true
	return true
}

func (c *Chain) add(id string) {
	c.mu.Lock()
	c.ids[id] = true
	c.mu.Unlock()
}

// Only wraps s so that it handles the chain's events alone; the runner
// acknowledges any other without effect, leaving it to the processes whose
// work it is. A Serial stage stays Serial.
func (c *Chain) Only(s Stage) Stage { return chainStage{Stage: s, chain: c} }

type chainStage struct {
	Stage
	chain *Chain
}

func (s chainStage) Serial() bool {
	se, ok := s.Stage.(Serial)
	return ok && se.Serial()
}

func (s chainStage) Handle(ctx context.Context, ev Event, out Emitter) error {
	if !s.chain.take(ev) {
		return nil
	}
	return s.Stage.Handle(ctx, ev, chainEmitter{Emitter: out, chain: s.chain})
}

// chainEmitter adds what the stage emits to the chain before it is
// published: another stage of the job may then be handed an effect of it
// (from a process that shares the job's input) before it sees the event
// itself.
type chainEmitter struct {
	Emitter
	chain *Chain
}

func (e chainEmitter) Emit(typ string, payload any, opts ...EmitOption) (Event, error) {
	ev, err := e.Emitter.Emit(typ, payload, opts...)
	if err == nil {
		e.chain.add(ev.ID)
	}
	return ev, err
}
