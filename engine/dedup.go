package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// dedupTrust is the part of the dedup window within which an input's
// outputs are left to the stream's deduplication alone. Outputs of an
// earlier delivery were published after the input was stored, so while
// the input is younger than the window the stream still remembers their
// ids; half leaves room for clock differences between the server, which
// stamps the input, and this process.
const dedupTrust = 2

// unpublished returns out without the events the stream already holds.
// It looks only when the input (stored at stored) is old enough that an
// earlier delivery's outputs could have left the dedup window — a process
// that published and died before acking, redelivered after a long outage
// or to a re-created consumer — so the common case costs nothing. Every
// event on the outputs' subjects is read, not only those after the input:
// a decision (AsDecision) may have been stored before it.
func (l *Log) unpublished(ctx context.Context, stored time.Time, out []Event) ([]Event, error) {
	if len(out) == 0 || time.Since(stored) < l.cfg.DedupWindow/dedupTrust {
		return out, nil
	}
	seen := map[string]bool{}
	var subjects []string
	for _, ev := range out {
		if s := ev.Subject(); !seen[s] {
			seen[s] = true
			subjects = append(subjects, s)
		}
	}
	have, err := l.storedIDs(ctx, subjects)
	if err != nil {
		return nil, fmt.Errorf("engine: look for outputs stored before: %w", err)
	}
	var kept []Event
	for _, ev := range out {
		if !have[ev.ID] {
			kept = append(kept, ev)
		}
	}
	return kept, nil
}

// storedIDs reads the message ids of every event on subjects, headers
// only. Messages without a valid envelope are skipped: they are not
// outputs of any stage.
func (l *Log) storedIDs(ctx context.Context, subjects []string) (map[string]bool, error) {
	ids := map[string]bool{}
	err := l.scan(ctx, subjects, ReplayFrom{}, true, func(msg jetstream.Msg, _ *jetstream.MsgMetadata) error {
		if id := msg.Headers().Get(jetstream.MsgIDHeader); id != "" {
			ids[id] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// dropOrdered deletes a lookup's ordered consumer once it is done. The
// server keeps one for five minutes of idleness and a stream holds at
// most 1000 consumers: handlers of old inputs, each looking for its
// outputs, came and went faster than that in an ablation's twelve
// branches, and then no stage could create a consumer ("maximum consumers
// limit reached"). A failed delete is left to the idleness timeout.
func (l *Log) dropOrdered(cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || info.Name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.js.DeleteConsumer(ctx, l.cfg.Stream, info.Name)
}
