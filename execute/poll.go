package execute

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/t1pipe/t1/engine"
)

// pollGrace is how long a progress loop keeps going while the log cannot
// be read. The stages ride out a server restart or a cluster electing a
// new stream leader by re-creating their consumers; the loop watching
// them must not end the run over the same outage.
const pollGrace = 2 * time.Minute

// countPoller reads one run's event counts for a progress loop. A failed
// read returns the last counts read and is retried at the next call;
// only reads failing for longer than grace end the loop.
type countPoller struct {
	log     *engine.Log
	run     string
	grace   time.Duration
	timeout time.Duration // of one read

	last         map[string]uint64
	failingSince time.Time
}

func newCountPoller(log *engine.Log, run string) *countPoller {
	return &countPoller{log: log, run: run, grace: pollGrace, timeout: 10 * time.Second}
}

func (p *countPoller) poll(ctx context.Context) (map[string]uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, p.timeout)
	all, err := p.log.EventCounts(rctx, p.run)
	cancel()
	if err == nil {
		if !p.failingSince.IsZero() {
			slog.Info("event log readable again", "run", p.run, "after", time.Since(p.failingSince).Round(time.Second))
		}
		p.failingSince = time.Time{}
		p.last = all[p.run]
		return p.last, nil
	}
	if ctx.Err() != nil {
		return p.last, nil
	}
	if p.failingSince.IsZero() {
		p.failingSince = time.Now()
		slog.Warn("cannot read the event log, retrying", "run", p.run, "err", err)
	}
	if d := time.Since(p.failingSince); d > p.grace {
		return nil, fmt.Errorf("%w (failing for %s)", err, d.Round(time.Second))
	}
	return p.last, nil
}
