package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/t1pipe/t1/keys"
)

// Counts are a stream's messages by run, then by event type.
type Counts map[string]map[string]uint64

// Total is the number of messages counted.
func (c Counts) Total() uint64 {
	var n uint64
	for _, types := range c {
		for _, k := range types {
			n += k
		}
	}
	return n
}

// EventCounts counts the events of run (of every run when run is "") by
// run and type, from the event stream's per-subject totals: one request
// however long the log, cheap enough to poll.
func (l *Log) EventCounts(ctx context.Context, run string) (Counts, error) {
	c, err := subjectCounts(ctx, l.stream, "t1", run)
	if err != nil {
		return nil, fmt.Errorf("engine: count events: %w", err)
	}
	return c, nil
}

// DeadLetterCounts counts the dead letters of run (of every run when run
// is "") by run and the type of the event that died, from the dead-letter
// stream's per-subject totals.
func (l *Log) DeadLetterCounts(ctx context.Context, run string) (Counts, error) {
	c, err := subjectCounts(ctx, l.dlq, dlqPrefix(l.cfg), run)
	if err != nil {
		return nil, fmt.Errorf("engine: count dead letters: %w", err)
	}
	return c, nil
}

// Runs lists, sorted, the runs that have events in the log.
func (l *Log) Runs(ctx context.Context) ([]string, error) {
	c, err := l.EventCounts(ctx, "")
	if err != nil {
		return nil, err
	}
	runs := make([]string, 0, len(c))
	for run := range c {
		runs = append(runs, run)
	}
	sort.Strings(runs)
	return runs, nil
}

// HasEvent reports whether the log holds an event of run and type typ.
func (l *Log) HasEvent(ctx context.Context, run, typ string) (bool, error) {
	subject := Subject(run, typ)
	_, err := l.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("engine: look up %s: %w", subject, err)
	}
	return true, nil
}

// subjectCounts reads the per-subject totals of stream's subjects
// <prefix>.<run>.<type> for run, or for every run when run is "".
// Subjects of another shape (a raw publish, not an event) are not counted.
func subjectCounts(ctx context.Context, stream jetstream.Stream, prefix, run string) (Counts, error) {
	filter := prefix + ".>"
	if run != "" {
		if err := keys.ValidRun(run); err != nil {
			return nil, err
		}
		filter = prefix + "." + run + ".>"
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, err
	}
	out := Counts{}
	for subject, n := range info.State.Subjects {
		r, typ, ok := cutSubject(prefix, subject)
		if !ok {
			continue
		}
		if out[r] == nil {
			out[r] = map[string]uint64{}
		}
		out[r][typ] += n
	}
	return out, nil
}
