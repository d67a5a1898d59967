// Package faults_test breaks the infrastructure under a running pipeline —
// the NATS server restarted, the S3 endpoint unreachable — and checks that
// the stages back off, reconnect and finish with nothing lost: every
// requested attempt scored, the same events as a run without the fault, no
// failed events and no dead letters.
package faults_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/pipelinetest"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) {
	code := testinfra.Main(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// attemptsPerRun is how many attempts each run requests: enough that a
// fault injected after the first one lands while others are in flight.
const attemptsPerRun = 6

// runnerConfig is the production runner configuration (deliveries, back-off
// and in-process retry budget are the defaults) with a shorter ack wait, so
// an acknowledgement lost in an outage is redelivered within the test.
func runnerConfig() engine.RunnerConfig {
	return engine.RunnerConfig{Concurrency: 2, AckWait: 10 * time.Second}
}

// startAttemptStages runs rollout and reward on l and st until the test
// ends. Attempts are demonstrations (purpose sft): the task's reference
// solution played turn by turn through the harness in a fresh sandbox, so
// every attempt does real sandbox, store and bus work and should score in
// full.
func startAttemptStages(t *testing.T, l *engine.Log, st store.ObjectStore) {
	t.Helper()
	pipelinetest.Run(t, pipelinetest.Config(t), l, st, runnerConfig(), []string{"rollout", "reward"})
}

// requestAttempts stores two generated tasks for run and requests
// attemptsPerRun attempts across them. It returns the total number of
// assertions the attempts should pass.
func requestAttempts(t *testing.T, ctx context.Context, l *engine.Log, st store.ObjectStore, run string) int {
	t.Helper()
	started, err := engine.NewRootEvent(run, schemas.RunStarted, "start", schemas.RunStartedPayload{Seed: 1, RewardScale: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, started); err != nil {
		t.Fatal(err)
	}
	var ids []string
	checks := map[string]int{}
	for _, seed := range []uint64{3, 7} {
		sp, err := taskgen.Build([]taskgen.StepRef{{Name: "source.csv", Seed: seed, Input: -1}, {Name: "csv.aggregate", Seed: seed + 1, Input: 0}})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := sp.Task(0)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := trial.PutBundle(ctx, st, run, tk.Name, tk); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.Name)
		checks[tk.Name] = len(sp.Checks)
	}
	want := 0
	for a := range attemptsPerRun {
		id := ids[a%len(ids)]
		want += checks[id]
		ev, err := engine.NewRootEvent(run, schemas.RolloutRequested, fmt.Sprint(a), schemas.RolloutRequestedPayload{
			TaskID: id, Attempt: a, Purpose: "sft", Seed: uint64(11 + a), MaxTurns: 12,
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

// waitScored waits until every attempt of run is scored.
func waitScored(t *testing.T, l *engine.Log, run string, total time.Duration) {
	t.Helper()
	testinfra.CheckFor(t, total, func() error {
		if n := count(l, "t1."+run+"."+schemas.RewardScored); n != attemptsPerRun {
			return fmt.Errorf("run %s: %d of %d attempts scored, %d completed, %d failed events", run, n, attemptsPerRun,
				count(l, "t1."+run+"."+schemas.RolloutCompleted), count(l, "t1."+run+".*.*.failed"))
		}
		return nil
	})
}

// count is testinfra.Count that tolerates a bus that is briefly away: the
// tests poll straight through the faults they inject.
func count(l *engine.Log, filter string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := l.Stream().Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return -1
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

// outcome is what a run left in the log, for comparing a faulted run with
// one that ran without the fault.
type outcome struct {
	events map[string]int // by type
	passed int            // assertions passed over every attempt
	failed []string       // reasons of <type>.failed events
	dead   int            // dead letters of the run
}

func outcomeOf(t *testing.T, l *engine.Log, run string) outcome {
	t.Helper()
	o := outcome{events: map[string]int{}}
	for _, ev := range testinfra.Events(t, l, "t1."+run+".>") {
		o.events[ev.Type]++
		switch {
		case ev.Type == schemas.RewardScored:
			var p schemas.RewardScoredPayload
			if err := ev.Decode(&p); err != nil {
				t.Fatal(err)
			}
			o.passed += p.Passed
		case strings.HasSuffix(ev.Type, ".failed"):
			var f engine.Failure
			_ = ev.Decode(&f)
			o.failed = append(o.failed, f.Type+": "+f.Reason)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dead, err := l.DeadLetterCounts(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	o.dead = int(dead.Total())
	return o
}

// checkNothingLost compares a faulted run with a run without the fault.
func checkNothingLost(t *testing.T, faulted, clean outcome, wantPassed int) {
	t.Helper()
	if len(faulted.failed) != 0 || faulted.dead != 0 {
		t.Fatalf("faulted run: %d failed events %q, %d dead letters", len(faulted.failed), faulted.failed, faulted.dead)
	}
	if clean.passed != wantPassed || faulted.passed != wantPassed {
		t.Fatalf("assertions passed: %d faulted, %d without the fault, want %d", faulted.passed, clean.passed, wantPassed)
	}
	if len(faulted.events) != len(clean.events) {
		t.Fatalf("event types: faulted %v, without the fault %v", faulted.events, clean.events)
	}
	for typ, n := range clean.events {
		if faulted.events[typ] != n {
			t.Fatalf("%d %s events in the faulted run, %d without the fault (%v vs %v)", faulted.events[typ], typ, n, faulted.events, clean.events)
		}
	}
}
