package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Status is what the log holds, as `t1 status` shows it: its streams, its
// consumers and what each has left, and its events, dead letters and
// failures counted per run and type.
type Status struct {
	Streams     []StreamStatus   `json:"streams"`
	Consumers   []ConsumerStatus `json:"consumers"`
	DeadLetters []EventCount     `json:"dead_letters"`
	// Failed counts <type>.failed events per run by the type that failed.
	Failed []EventCount `json:"failed"`
	Events []EventCount `json:"events"`
}

type StreamStatus struct {
	Name     string `json:"name"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

type ConsumerStatus struct {
	Name        string `json:"name"`
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ack_pending"`
	Redelivered int    `json:"redelivered"`
	Delivered   uint64 `json:"delivered_seq"`
}

type EventCount struct {
	Run   string `json:"run"`
	Type  string `json:"type"`
	Count uint64 `json:"count"`
}

// Status reads the log's status.
func (l *Log) Status(ctx context.Context) (Status, error) {
	var st Status
	for _, s := range []jetstream.Stream{l.Stream(), l.DeadLetters()} {
		info, err := s.Info(ctx)
		if err != nil {
			return st, fmt.Errorf("stream info: %w", err)
		}
		st.Streams = append(st.Streams, StreamStatus{
			Name: info.Config.Name, Messages: info.State.Msgs, Bytes: info.State.Bytes,
			FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq,
		})
	}
	events, err := l.EventCounts(ctx, "")
	if err != nil {
		return st, err
	}
	dead, err := l.DeadLetterCounts(ctx, "")
	if err != nil {
		return st, err
	}
	st.Events = countRows(events)
	st.Failed = failedCounts(st.Events)
	st.DeadLetters = countRows(dead)
	lister := l.Stream().ListConsumers(ctx)
	for info := range lister.Info() {
		st.Consumers = append(st.Consumers, ConsumerStatus{
			Name: info.Name, Pending: info.NumPending, AckPending: info.NumAckPending,
			Redelivered: info.NumRedelivered, Delivered: info.Delivered.Stream,
		})
	}
	if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return st, fmt.Errorf("consumers: %w", err)
	}
	sort.Slice(st.Consumers, func(i, j int) bool { return st.Consumers[i].Name < st.Consumers[j].Name })
	return st, nil
}

// countRows turns counts into rows sorted by run and type.
func countRows(c Counts) []EventCount {
	var out []EventCount
	for run, types := range c {
		for typ, n := range types {
			out = append(out, EventCount{Run: run, Type: typ, Count: n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Run != out[j].Run {
			return out[i].Run < out[j].Run
		}
		return out[i].Type < out[j].Type
	})
	return out
}

// failedCounts picks the <type>.failed rows out of counts, keyed by the
// type that failed.
func failedCounts(counts []EventCount) []EventCount {
	var out []EventCount
	for _, c := range counts {
		if typ, ok := strings.CutSuffix(c.Type, FailedType("")); ok {
			out = append(out, EventCount{Run: c.Run, Type: typ, Count: c.Count})
		}
	}
	return out
}
