package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ProjectionBucket is the KV bucket that keeps projection state.
const ProjectionBucket = "t1_projections"

// Projection folds events into a state. Apply must be pure and
// deterministic: the same events in the same order give the same state, so
// state rebuilt from the log equals the live state.
type Projection[S any] struct {
	// Name is the KV key; one key per projection (and run, if the
	// projection is run-scoped: put the run in the name).
	Name string
	// Filters are subject filters, e.g. SubjectFilter("task.audited") or
	// Subject(run, ">").
	Filters []string
	Init    func() S
	Apply   func(S, Event) (S, error)
}

// Snapshot is what the KV bucket stores: the state and the last stream
// sequence folded into it.
type Snapshot[S any] struct {
	Seq   uint64 `json:"seq"`
	State S      `json:"state"`
}

// Projector keeps one projection's state in JetStream KV, updated with
// revision compare-and-set so several processes may fold the same
// projection without losing or double-applying an event.
type Projector[S any] struct {
	p   Projection[S]
	log *Log
	kv  jetstream.KeyValue
}

// NewProjector opens (creating if needed) the projection bucket.
func NewProjector[S any](ctx context.Context, l *Log, p Projection[S]) (*Projector[S], error) {
	if p.Name == "" || p.Init == nil || p.Apply == nil || len(p.Filters) == 0 {
		return nil, errors.New("engine: projection needs a name, filters, Init and Apply")
	}
	kv, err := l.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      ProjectionBucket,
		Description: "t1 projections: folds of the event log",
		Storage:     jetstream.FileStorage,
		History:     1,
		Replicas:    l.cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: projection bucket: %w", err)
	}
	return &Projector[S]{p: p, log: l, kv: kv}, nil
}

// Load returns the stored snapshot and its KV revision (0 when absent).
func (pr *Projector[S]) Load(ctx context.Context) (Snapshot[S], uint64, error) {
	e, err := pr.kv.Get(ctx, pr.p.Name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Snapshot[S]{State: pr.p.Init()}, 0, nil
	}
	if err != nil {
		return Snapshot[S]{}, 0, fmt.Errorf("engine: projection %s: %w", pr.p.Name, err)
	}
	snap := Snapshot[S]{State: pr.p.Init()}
	if err := json.Unmarshal(e.Value(), &snap); err != nil {
		return Snapshot[S]{}, 0, fmt.Errorf("engine: projection %s: stored state: %w", pr.p.Name, err)
	}
	return snap, e.Revision(), nil
}

// CatchUp folds every event after the stored sequence into the state and
// stores it. If another process stored a newer state meanwhile, it starts
// again from that one. It returns the state it stored.
func (pr *Projector[S]) CatchUp(ctx context.Context) (Snapshot[S], error) {
	for {
		snap, rev, err := pr.Load(ctx)
		if err != nil {
			return snap, err
		}
		before := snap.Seq
		err = pr.log.Replay(ctx, pr.p.Filters, ReplayFrom{Seq: snap.Seq + 1}, func(ev Event) error {
			s, err := pr.p.Apply(snap.State, ev)
			if err != nil {
				return fmt.Errorf("engine: projection %s at seq %d: %w", pr.p.Name, ev.Seq, err)
			}
			snap.State, snap.Seq = s, ev.Seq
			return nil
		})
		if err != nil {
			return snap, err
		}
		if snap.Seq == before && rev != 0 {
			return snap, nil
		}
		data, err := json.Marshal(snap)
		if err != nil {
			return snap, fmt.Errorf("engine: projection %s: %w", pr.p.Name, err)
		}
		if rev == 0 {
			_, err = pr.kv.Create(ctx, pr.p.Name, data)
		} else {
			_, err = pr.kv.Update(ctx, pr.p.Name, data, rev)
		}
		if err == nil {
			return snap, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongLastSequence(err) {
			return snap, fmt.Errorf("engine: projection %s: store: %w", pr.p.Name, err)
		}
		// Lost the compare-and-set: someone else advanced it; fold again.
	}
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// Run keeps the projection current: it catches up, then again every
// interval, until ctx ends.
func (pr *Projector[S]) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := pr.CatchUp(ctx); err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Rebuild folds the projection from the beginning of the log up to and
// including seq (the whole log when seq is 0) without touching the stored
// state, so it can be compared with it.
func (pr *Projector[S]) Rebuild(ctx context.Context, seq uint64) (Snapshot[S], error) {
	snap := Snapshot[S]{State: pr.p.Init()}
	stopAt := errors.New("stop")
	err := pr.log.Replay(ctx, pr.p.Filters, ReplayFrom{}, func(ev Event) error {
		if seq > 0 && ev.Seq > seq {
			return stopAt
		}
		s, err := pr.p.Apply(snap.State, ev)
		if err != nil {
			return err
		}
		snap.State, snap.Seq = s, ev.Seq
		return nil
	})
	if err != nil && !errors.Is(err, stopAt) {
		return snap, err
	}
	return snap, nil
}
