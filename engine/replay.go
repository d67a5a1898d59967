package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/t1pipe/t1/keys"
)

// ReplayFrom says where a replay starts: a stream sequence, a time, or
// (both zero) the beginning of the log.
type ReplayFrom struct {
	Seq  uint64
	Time time.Time
}

// Replay reads, in order, every event whose subject matches one of filters
// from the start point up to the end of the log as it was when Replay was
// called, and calls fn for each. It uses an ordered ephemeral consumer, so
// it leaves no state on the server and never disturbs stage consumers.
// A malformed message stops the replay with an error naming it; so does an
// error from fn.
func (l *Log) Replay(ctx context.Context, filters []string, from ReplayFrom, fn func(Event) error) error {
	cons, err := l.ordered(ctx, filters, from)
	if err != nil {
		return fmt.Errorf("engine: replay: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("engine: replay: %w", err)
	}
	if info.NumPending == 0 {
		return nil
	}
	return l.read(ctx, cons, true, fn)
}

// ReplayRun is Replay of run's events of the given types (of every type
// when types is empty) from the beginning of the log. The server filters
// them, so what it reads is the run's own events: a stage that folds one
// run at a time calls it the first time it meets the run, at a cost that
// does not grow with the other runs in the log. An invalid run id is a
// Permanent error: no retry can make it one.
func (l *Log) ReplayRun(ctx context.Context, run string, types []string, fn func(Event) error) error {
	if err := keys.ValidRun(run); err != nil {
		return Permanent(fmt.Errorf("engine: replay: %w", err))
	}
	if len(types) == 0 {
		return l.Replay(ctx, []string{Subject(run, ">")}, ReplayFrom{}, fn)
	}
	// The server refuses overlapping filters, so each type once.
	types = slices.Compact(slices.Sorted(slices.Values(types)))
	filters := make([]string, len(types))
	for i, t := range types {
		filters[i] = Subject(run, t)
	}
	return l.Replay(ctx, filters, ReplayFrom{}, fn)
}

// WithReadHook returns a handle on the same log whose Replay, ReplayRun
// and Follow call hook with every event they read, before handing it on;
// l itself is unchanged. It measures what a reader of the log reads, for
// example that a stage folding one run reads no other run's events.
func (l *Log) WithReadHook(hook func(Event)) *Log {
	c := *l
	c.readHook = hook
	return &c
}

// Follow is Replay without an end: after the events already in the log it
// keeps delivering new ones until ctx ends (returning nil) or fn fails.
// from.Seq beyond the end of the log waits for that sequence.
func (l *Log) Follow(ctx context.Context, filters []string, from ReplayFrom, fn func(Event) error) error {
	cons, err := l.ordered(ctx, filters, from)
	if err != nil {
		return fmt.Errorf("engine: follow: %w", err)
	}
	return l.read(ctx, cons, false, fn)
}

func (l *Log) ordered(ctx context.Context, filters []string, from ReplayFrom) (jetstream.Consumer, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filters, DeliverPolicy: jetstream.DeliverAllPolicy}
	switch {
	case from.Seq > 0:
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = from.Seq
	case !from.Time.IsZero():
		t := from.Time
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &t
	}
	return l.js.OrderedConsumer(ctx, l.cfg.Stream, cfg)
}

// read feeds cons's events to fn; with stopAtEnd it returns after the
// event that had nothing pending behind it.
func (l *Log) read(ctx context.Context, cons jetstream.Consumer, stopAtEnd bool, fn func(Event) error) error {
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("engine: read log: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			switch {
			case ctx.Err() != nil && stopAtEnd:
				return ctx.Err()
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, jetstream.ErrMsgIteratorClosed):
				return errors.New("engine: read log: consumer closed before the end of the log")
			}
			return fmt.Errorf("engine: read log: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("engine: read log: %w", err)
		}
		ev, err := ParseMessage(msg.Subject(), msg.Headers(), msg.Data(), meta.Sequence.Stream)
		if err != nil {
			return fmt.Errorf("engine: read log at seq %d: %w", meta.Sequence.Stream, err)
		}
		if l.readHook != nil {
			l.readHook(ev)
		}
		if err := fn(ev); err != nil {
			return err
		}
		if stopAtEnd && meta.NumPending == 0 {
			return nil
		}
	}
}

// LastEvent is the latest event of run in the log; ok is false when the
// run has none.
func (l *Log) LastEvent(ctx context.Context, run string) (ev Event, ok bool, err error) {
	if err := keys.ValidRun(run); err != nil {
		return Event{}, false, Permanent(fmt.Errorf("engine: last event: %w", err))
	}
	subject := Subject(run, ">")
	msg, err := l.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Event{}, false, nil
	}
	if err != nil {
		return Event{}, false, fmt.Errorf("engine: last event of %s: %w", run, err)
	}
	ev, err = ParseMessage(msg.Subject, msg.Header, msg.Data, msg.Sequence)
	if err != nil {
		return Event{}, false, fmt.Errorf("engine: last event of %s: %w", run, err)
	}
	return ev, true, nil
}
