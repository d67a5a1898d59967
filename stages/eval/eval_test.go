package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// recorder is an engine.Emitter that keeps what was emitted.
type recorder struct{ evs []engine.Event }

func (r *recorder) Emit(typ string, payload any, _ ...engine.EmitOption) (engine.Event, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return engine.Event{}, err
	}
	ev := engine.Event{Type: typ, Payload: b}
	r.evs = append(r.evs, ev)
	return ev, nil
}

func publish(t *testing.T, l *engine.Log, run, typ, key string, payload any) engine.Event {
	t.Helper()
	ev, err := engine.NewRootEvent(run, typ, key, payload)
	if err != nil {
		t.Fatal(err)
	}
	if ev, err = l.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// evaluation publishes an evaluation of run with attempts attempts, the
// first scored (solved in 3 turns), the others still out, and returns
// the attempts' requests and the events eval folds.
func evaluation(t *testing.T, l *engine.Log, run string, attempts int) (requests, folded []engine.Event) {
	t.Helper()
	publish(t, l, run, schemas.EvalRequested, "eval", schemas.EvalRequestedPayload{Suite: "s", Attempts: attempts})
	for a := range attempts {
		rr := publish(t, l, run, schemas.RolloutRequested, fmt.Sprint(a), schemas.RolloutRequestedPayload{TaskID: "t", Attempt: a, Purpose: "eval", Suite: "s"})
		requests = append(requests, rr)
		folded = append(folded, rr)
		// Not folded by eval: must not be read.
		publish(t, l, run, schemas.TaskAudited, fmt.Sprint(a), schemas.TaskAuditedPayload{TaskID: "t"})
	}
	folded = append(folded,
		publish(t, l, run, schemas.RolloutCompleted, "0", schemas.RolloutCompletedPayload{TaskID: "t", Attempt: 0, Purpose: "eval", Suite: "s", Turns: 3}),
		publish(t, l, run, schemas.RewardScored, "0", schemas.RewardScoredPayload{TaskID: "t", Attempt: 0, Purpose: "eval", Suite: "s", Passed: 2, Total: 2, Reward: 2}))
	return requests, folded
}

// With other runs in the log, eval folds a run from that run's own events
// alone, once, and completes its evaluation from them.
func TestFoldReadsOnlyTheRun(t *testing.T) {
	ctx := context.Background()
	l := testinfra.Log(t)
	_, others := evaluation(t, l, "other", 20)
	reqs, mine := evaluation(t, l, "mine", 2)
	evaluation(t, l, "third", 20)

	byRun := map[string]int{}
	task := filepath.Join(testinfra.WorkDir(), "..", "..", "harbor", "testdata", "tasks", "word-freq")
	s := newStage(StageConfig{Log: l.WithReadHook(func(ev engine.Event) { byRun[ev.Run]++ }), Store: testinfra.Store(t),
		Suites: map[string]Suite{"s": {Dirs: []string{task}}}, TempDir: t.TempDir()})

	var rec recorder
	if err := s.handle(ctx, mine[len(mine)-1], &rec); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(byRun, map[string]int{"mine": len(mine)}) || len(rec.evs) != 0 {
		t.Fatalf("read %v, want only the run's %d folded events; emitted %v", byRun, len(mine), rec.evs)
	}
	// The last attempt's outcome, folded as it comes, completes the
	// evaluation from this run's attempts alone; the failed one is
	// counted as unscored, outside the rates.
	failed := publish(t, l, "mine", engine.FailedType(schemas.RolloutRequested), "1", engine.Failure{EventID: reqs[1].ID})
	if err := s.handle(ctx, failed, &rec); err != nil {
		t.Fatal(err)
	}
	var p schemas.EvalCompletedPayload
	if len(rec.evs) != 1 || rec.evs[0].Type != schemas.EvalCompleted || rec.evs[0].Decode(&p) != nil {
		t.Fatalf("emitted %v, want eval.completed", rec.evs)
	}
	if p.Suite != "s" || p.Tasks != 1 || p.Attempts != 1 || p.Unscored != 1 || p.ResolveRate != 1 || p.MeanReward != 1 || p.MeanTurns != 3 || len(p.Results) != 1 {
		t.Fatalf("eval.completed %+v", p)
	}
	if !reflect.DeepEqual(byRun, map[string]int{"mine": len(mine)}) {
		t.Fatalf("the run was read again: %v", byRun)
	}
	if err := s.handle(ctx, others[0], &recorder{}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(byRun, map[string]int{"mine": len(mine), "other": len(others)}) {
		t.Fatalf("read %v after the other run's first event", byRun)
	}
}

// Every task's attempt samples from a stream of its own, and each policy
// version of the run meets the same streams.
func TestAttemptsDrawIndependentSeeds(t *testing.T) {
	ctx := context.Background()
	l := testinfra.Log(t)
	dir := filepath.Join(testinfra.WorkDir(), "..", "..", "harbor", "testdata", "tasks")
	s := newStage(StageConfig{Log: l, Store: testinfra.Store(t), TempDir: t.TempDir(),
		Suites: map[string]Suite{"s": {Dirs: []string{filepath.Join(dir, "word-freq"), filepath.Join(dir, "log-rotate")}}}})
	seeds := func(version int) map[string]uint64 {
		ev := publish(t, l, "r", schemas.EvalRequested, fmt.Sprint("v", version), schemas.EvalRequestedPayload{Suite: "s", Attempts: 3, PolicyVersion: int64(version)})
		var rec recorder
		if err := s.handle(ctx, ev, &rec); err != nil {
			t.Fatal(err)
		}
		out := map[string]uint64{}
		for _, e := range rec.evs {
			var p schemas.RolloutRequestedPayload
			if e.Type != schemas.RolloutRequested || e.Decode(&p) != nil {
				t.Fatalf("emitted %s", e.Type)
			}
			out[attemptID(p.TaskID, p.Attempt)] = p.Seed
		}
		return out
	}
	v0, v2 := seeds(0), seeds(2)
	if len(v0) != 6 {
		t.Fatalf("%d attempts, want 2 tasks × 3", len(v0))
	}
	distinct := map[uint64]bool{}
	for _, seed := range v0 {
		distinct[seed] = true
	}
	if len(distinct) != len(v0) {
		t.Fatalf("seeds %v: attempts share sampling streams", v0)
	}
	if !reflect.DeepEqual(v0, v2) {
		t.Fatalf("policy v0's seeds %v differ from v2's %v", v0, v2)
	}
}
