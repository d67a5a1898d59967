package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultLeaseTTL is how long a crashed process's stage lease lasts.
const DefaultLeaseTTL = 30 * time.Second

// IsSerial tells a stage that must run once per run (Serial).
func IsSerial(s Stage) bool {
	se, ok := s.(Serial)
	return ok && se.Serial()
}

// StageLease is the lease of stage over every run (run empty) or of stage
// for run alone: Lease keeps the one and the other from being held at
// once, while leases of two runs are independent.
func StageLease(stage, run string) string {
	if run == "" {
		return "stage-" + stage
	}
	return "stage-" + stage + "." + run
}

// HoldStageLeases takes the lease of each of stages, for run (every run
// when empty), on behalf of this process, and renews them until ctx ends;
// lost is called, once per lease, if one is lost meanwhile. release gives
// them up. A stage already leased elsewhere fails it with ErrLeased
// (wrapped, naming the holder). The lease of a process of this host that
// no longer runs is taken over at once, not after its TTL.
func (l *Log) HoldStageLeases(ctx context.Context, stages []Stage, run string, ttl time.Duration, lost func(error)) (release func(), err error) {
	var held []*Lease
	release = func() {
		for _, ls := range held {
			_ = ls.Release(context.Background())
		}
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("%s pid %d at %s", host, os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
	for _, s := range stages {
		ls, err := l.AcquireLeaseFrom(ctx, StageLease(s.Name(), run), holder, ttl, DeadHere)
		if err != nil {
			release()
			if errors.Is(err, ErrLeased) {
				return nil, fmt.Errorf("stage %s%s runs elsewhere: %w", s.Name(), ofRun(run), err)
			}
			return nil, err
		}
		held = append(held, ls)
		go func() {
			if err := ls.Keep(ctx); err != nil {
				lost(err)
			}
		}()
	}
	return release, nil
}

func ofRun(run string) string {
	if run == "" {
		return ""
	}
	return " of run " + run
}

// DeadHere reports whether holder (as HoldStageLeases names holders) is a
// process of this host that no longer runs: a t1 killed a moment ago,
// whose lease would otherwise keep its restart out until the TTL.
func DeadHere(holder string) bool {
	f := strings.Fields(holder)
	if len(f) < 3 || f[1] != "pid" {
		return false
	}
	host, _ := os.Hostname()
	pid, err := strconv.Atoi(f[2])
	if f[0] != host || err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// HasConsumer reports whether the log's stream has the durable consumer
// name.
func (l *Log) HasConsumer(ctx context.Context, name string) (bool, error) {
	_, err := l.js.Consumer(ctx, l.cfg.Stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	return err == nil, err
}

// DeleteConsumers deletes the named consumers; one that is not there is
// no error.
func (l *Log) DeleteConsumers(ctx context.Context, names []string) error {
	for _, n := range names {
		if err := l.Stream().DeleteConsumer(ctx, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("delete consumer %s: %w", n, err)
		}
	}
	return nil
}

// DeleteRunConsumers deletes the consumers of run alone (Durable(stage,
// run)). An ended run's own consumers have nothing left to deliver, and a
// stream holds at most 1000 of them; a later runner of a stage of the run
// makes its consumer again.
func (l *Log) DeleteRunConsumers(ctx context.Context, run string) error {
	names := l.Stream().ConsumerNames(ctx)
	var mine []string
	for n := range names.Name() {
		// A consumer of a job within another run can end in "_<run>" too,
		// after a second '_'.
		if stage, ok := strings.CutSuffix(n, "_"+run); ok && !strings.Contains(stage, "_") {
			mine = append(mine, n)
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("consumers: %w", err)
	}
	return l.DeleteConsumers(ctx, mine)
}
