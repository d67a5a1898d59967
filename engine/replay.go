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
	var fnErr error
	err := l.scan(ctx, filters, from, false, func(msg jetstream.Msg, meta *jetstream.MsgMetadata) error {
		ev, err := l.event(msg, meta)
		if err != nil {
			return err
		}
		fnErr = fn(ev)
		return fnErr
	})
	if err == nil || err == fnErr || err == ctx.Err() {
		return err
	}
	return fmt.Errorf("engine: replay: %w", err)
}

// scan hands fn, in order, every message on filters from the start point
// up to the last one the stream's leader held when scan was called.
//
// The end comes from the leader, not from the consumer: the server may
// place an ordered consumer on any replica of the stream, and a replica
// that is catching up (a node restarted mid-run) counts nothing pending
// behind what it holds so far. Reading until the consumer says nothing is
// pending would then end early, silently, on a log that is complete; the
// leader's last sequence makes the consumer wait for the replica instead.
func (l *Log) scan(ctx context.Context, filters []string, from ReplayFrom, headersOnly bool, fn func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	end, err := l.end(ctx, filters, from)
	if err != nil || end == 0 {
		return err
	}
	err = l.consume(ctx, filters, from, headersOnly, end, fn)
	if err == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// consume hands fn the messages on filters from the start point, through
// stream sequence end, or (end 0) until ctx ends, when it returns nil.
func (l *Log) consume(ctx context.Context, filters []string, from ReplayFrom, headersOnly bool, end uint64, fn func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	cons, err := l.ordered(ctx, filters, from, headersOnly)
	if err != nil {
		return err
	}
	defer l.dropOrdered(cons)
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return errors.New("read log: consumer closed before the end of the log")
			}
			return fmt.Errorf("read log: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		if err := fn(msg, meta); err != nil {
			return err
		}
		if end > 0 && meta.Sequence.Stream >= end {
			return nil
		}
	}
}

// event parses a message of the log and shows it to the read hook.
func (l *Log) event(msg jetstream.Msg, meta *jetstream.MsgMetadata) (Event, error) {
	ev, err := ParseMessage(msg.Subject(), msg.Headers(), msg.Data(), meta.Sequence.Stream)
	if err != nil {
		return Event{}, fmt.Errorf("read log at seq %d: %w", meta.Sequence.Stream, err)
	}
	if l.readHook != nil {
		l.readHook(ev)
	}
	return ev, nil
}

// end is the stream sequence of the last message on filters that the
// stream's leader holds (a message get is answered by the leader alone:
// the stream allows no direct gets), or 0 when there is none at or after
// from.
func (l *Log) end(ctx context.Context, filters []string, from ReplayFrom) (uint64, error) {
	var end uint64
	var at time.Time
	for _, f := range filters {
		msg, err := l.stream.GetLastMsgForSubject(ctx, f)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("end of the log on %s: %w", f, err)
		}
		if msg.Sequence > end {
			end, at = msg.Sequence, msg.Time
		}
	}
	if end < from.Seq || (!from.Time.IsZero() && at.Before(from.Time)) {
		return 0, nil
	}
	return end, nil
}

// ReplayRun is Replay of run's events of the given types (of every type
// when types is empty) from the beginning of the log. The server filters
// them, so what it reads is the run's own events: a stage that folds one
// run at a time calls it the first time it meets the run, at a cost that
// does not grow with the other runs in the log. An invalid run id is a
// Permanent error: no retry can make it one.
func (l *Log) ReplayRun(ctx context.Context, run string, types []string, fn func(Event) error) error {
	return l.replayRun(ctx, run, types, ReplayFrom{}, fn)
}

// replayRun is ReplayRun from a start point.
func (l *Log) replayRun(ctx context.Context, run string, types []string, from ReplayFrom, fn func(Event) error) error {
	if err := keys.ValidRun(run); err != nil {
		return Permanent(fmt.Errorf("engine: replay: %w", err))
	}
	if len(types) == 0 {
		return l.Replay(ctx, []string{Subject(run, ">")}, from, fn)
	}
	// The server refuses overlapping filters, so each type once.
	types = slices.Compact(slices.Sorted(slices.Values(types)))
	filters := make([]string, len(types))
	for i, t := range types {
		filters[i] = Subject(run, t)
	}
	return l.Replay(ctx, filters, from, fn)
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
	var fnErr error
	err := l.consume(ctx, filters, from, false, 0, func(msg jetstream.Msg, meta *jetstream.MsgMetadata) error {
		ev, err := l.event(msg, meta)
		if err != nil {
			return err
		}
		fnErr = fn(ev)
		return fnErr
	})
	if err == nil || err == fnErr {
		return err
	}
	return fmt.Errorf("engine: follow: %w", err)
}

func (l *Log) ordered(ctx context.Context, filters []string, from ReplayFrom, headersOnly bool) (jetstream.Consumer, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filters, HeadersOnly: headersOnly}
	cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = from.deliver()
	return l.js.OrderedConsumer(ctx, l.cfg.Stream, cfg)
}

// deliver is how a consumer that starts at from is told where to start.
func (from ReplayFrom) deliver() (jetstream.DeliverPolicy, uint64, *time.Time) {
	switch {
	case from.Seq > 0:
		return jetstream.DeliverByStartSequencePolicy, from.Seq, nil
	case !from.Time.IsZero():
		t := from.Time
		return jetstream.DeliverByStartTimePolicy, 0, &t
	}
	return jetstream.DeliverAllPolicy, 0, nil
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
