package control

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/lineage"
	"github.com/t1pipe/t1/schemas"
)

// recorder is an engine.Emitter that keeps what was emitted.
type recorder struct{ evs []engine.Event }

func (r *recorder) Emit(typ string, payload any, _ ...engine.EmitOption) (engine.Event, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return engine.Event{}, err
	}
	ev := engine.Event{ID: typ + "#" + string(rune('a'+len(r.evs))), Type: typ, Run: "r", Payload: b}
	r.evs = append(r.evs, ev)
	return ev, nil
}

func event(t *testing.T, id, typ string, payload any) engine.Event {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Event{ID: id, Type: typ, Run: "r", Payload: b}
}

// testConfig is the default run without fine-tuning, every pool task in
// every iteration, evaluated on the built-in suite.
func testConfig() Config {
	s := DefaultSettings()
	s.SFTSteps, s.TasksPerIteration = 0, 0
	return Config{Settings: s, EvalSuite: "builtin", EvalAttempts: 3}
}

func decide(t *testing.T, s *stage, st *runState) []engine.Event {
	t.Helper()
	var rec recorder
	if err := s.decide(context.Background(), "r", st, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.evs
}

// Rounds settle on every candidate's outcome — audited, discarded or
// failed — and the next round grows from what was accepted.
func TestRoundsSettleAndGrow(t *testing.T) {
	c := testConfig()
	c.Seeds, c.Rounds, c.PoolTarget, c.PerSeed = 3, 3, 100, 2
	s := &stage{cfg: StageConfig{Config: c}}
	st := newRunState("r")
	if got := decide(t, s, st); len(got) != 0 {
		t.Fatalf("decided before run.started: %v", got)
	}
	st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 5}))
	got := decide(t, s, st)
	if len(got) != 1 || got[0].Type != schemas.SynthRequested {
		t.Fatalf("after run.started: %v", got)
	}
	st.apply(got[0])
	if again := decide(t, s, st); len(again) != 0 {
		t.Fatalf("decided again before the round settled: %v", again)
	}
	st.apply(event(t, "c1", schemas.SynthCandidate, schemas.SynthCandidatePayload{Round: 0}))
	st.apply(event(t, "a1", schemas.TaskAudited, schemas.TaskAuditedPayload{TaskID: "t1", Round: 0, Decision: "accept"}))
	st.apply(event(t, "d1", schemas.SynthDiscarded, schemas.SynthDiscardedPayload{TaskID: "t2", Round: 0}))
	if got := decide(t, s, st); len(got) != 0 {
		t.Fatalf("decided with one candidate outstanding: %v", got)
	}
	st.apply(event(t, "f1", engine.FailedType(schemas.SynthCandidate), engine.Failure{EventID: "c1"}))
	got = decide(t, s, st)
	var p schemas.SynthRequestedPayload
	if len(got) != 1 || got[0].Type != schemas.SynthRequested || got[0].Decode(&p) != nil || p.Round != 1 ||
		len(p.SeedIDs) != 1 || p.SeedIDs[0] != "t1" || p.PerSeed != 2 || p.Seed != 5 {
		t.Fatalf("round 1 request: %v %+v", got, p)
	}
	// Round 1 fails as a whole: nothing accepted in it, so the pool seals
	// with round 0's task (a sealed pool needs the tasks rows: none here,
	// so the histogram stays empty).
	st.apply(got[0])
	st.apply(event(t, "rf", engine.FailedType(schemas.SynthRequested), engine.Failure{EventID: got[0].ID}))
	got = decide(t, s, st)
	if len(got) < 1 || got[0].Type != schemas.PoolSealed {
		t.Fatalf("after the last round: %v", got)
	}
	var sealed schemas.PoolSealedPayload
	if err := got[0].Decode(&sealed); err != nil || len(sealed.TaskIDs) != 1 || sealed.TaskIDs[0] != "t1" {
		t.Fatalf("pool %+v (%v)", sealed, err)
	}
}

// An iteration settles on scored and failed attempts; below MinSuccess the
// run fails with the reason.
func TestIterationBelowMinSuccessFailsTheRun(t *testing.T) {
	c := testConfig()
	c.Attempts, c.MinSuccess, c.EvalSuite = 2, 0.75, ""
	s := &stage{cfg: StageConfig{Config: c}}
	st := newRunState("r")
	st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 1}))
	st.apply(event(t, "sr", schemas.SynthRequested, schemas.SynthRequestedPayload{Round: 0, Seeds: 1}))
	st.apply(event(t, "aud", schemas.TaskAudited, schemas.TaskAuditedPayload{TaskID: "t1", Round: 0, Decision: "accept"}))
	st.apply(event(t, "seal", schemas.PoolSealed, schemas.PoolSealedPayload{TaskIDs: []string{"t1"}}))
	got := decide(t, s, st)
	if len(got) != 3 || got[0].Type != schemas.IterationStarted || got[1].Type != schemas.RolloutRequested {
		t.Fatalf("iteration 0 start and requests: %v", got)
	}
	var started schemas.IterationStartedPayload
	if err := got[0].Decode(&started); err != nil || started.Iteration != 0 || started.PolicyVersion != 0 || started.PoolVersion != 1 {
		t.Fatalf("iteration.started %+v (%v)", started, err)
	}
	for _, ev := range got {
		st.apply(ev)
	}
	st.apply(event(t, "sc", schemas.RewardScored, schemas.RewardScoredPayload{TaskID: "t1", Attempt: 0, Purpose: "train"}))
	st.apply(event(t, "fail", engine.FailedType(schemas.RolloutRequested), engine.Failure{EventID: got[2].ID}))
	got = decide(t, s, st)
	var p schemas.RunCompletedPayload
	if len(got) != 1 || got[0].Type != schemas.RunFailed || got[0].Decode(&p) != nil || p.Reason == "" {
		t.Fatalf("after 1 of 2 attempts: %v %+v", got, p)
	}
}

// The run completes only after the last policy's evaluation has an
// outcome, not when it is merely asked for.
func TestRunCompletesAfterTheLastEvaluation(t *testing.T) {
	c := testConfig()
	c.Attempts, c.Iterations, c.EvalBaseline = 1, 1, false
	s := &stage{cfg: StageConfig{Config: c}}
	st := newRunState("r")
	st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 1}))
	st.apply(event(t, "sr", schemas.SynthRequested, schemas.SynthRequestedPayload{Round: 0, Seeds: 1}))
	st.apply(event(t, "aud", schemas.TaskAudited, schemas.TaskAuditedPayload{TaskID: "t1", Round: 0, Decision: "accept"}))
	st.apply(event(t, "seal", schemas.PoolSealed, schemas.PoolSealedPayload{TaskIDs: []string{"t1"}}))
	for _, ev := range decide(t, s, st) {
		st.apply(ev)
	}
	st.apply(event(t, "sc", schemas.RewardScored, schemas.RewardScoredPayload{TaskID: "t1", Purpose: "train"}))
	st.iter(0).batch = true // the batch itself needs a store; its outcome is what matters here
	st.apply(event(t, "pu", schemas.PolicyUpdated, schemas.PolicyUpdatedPayload{Iteration: 0, PolicyVersion: 1}))
	got := decide(t, s, st)
	if len(got) != 1 || got[0].Type != schemas.EvalRequested {
		t.Fatalf("after the last update: %v", got)
	}
	st.apply(got[0])
	if got := decide(t, s, st); len(got) != 0 {
		t.Fatalf("decided while the last evaluation runs: %v", got)
	}
	st.apply(event(t, "ec", schemas.EvalCompleted, schemas.EvalCompletedPayload{Suite: c.EvalSuite, PolicyVersion: 1}))
	if got := decide(t, s, st); len(got) != 1 || got[0].Type != schemas.RunCompleted {
		t.Fatalf("after the last evaluation: %v", got)
	}
}

// A branch that only replayed a stage decides nothing; a continued one
// decides from what it took over and its own events, with its frozen
// iterations.
func TestBranchFoldDecides(t *testing.T) {
	c := testConfig()
	c.Iterations, c.Attempts, c.SFTSteps = 5, 1, 2
	s := &stage{cfg: StageConfig{Config: c}}
	replayed := newRunState("r")
	replayed.apply(event(t, "b", schemas.RunStarted, schemas.RunStartedPayload{Seed: 1, Parent: "p", Branch: &schemas.BranchPoint{Stage: "reward"}}))
	replayed.apply(event(t, "x", schemas.RewardScored, schemas.RewardScoredPayload{TaskID: "t", Purpose: schemas.PurposeTrain}))
	if got := decide(t, s, replayed); len(got) != 0 {
		t.Fatalf("a replayed branch decided %v", got)
	}
	cut, err := lineage.NewCut(schemas.BranchPoint{Stage: "reward", Iteration: 0, Continue: true})
	if err != nil {
		t.Fatal(err)
	}
	// The parent: a sealed pool of one task, fine-tuned, both policies
	// evaluated, and iteration 0's attempt rolled out; the cut takes it
	// all over.
	parent := parentHistory(t, "r")
	st := newRunState("r")
	for _, ev := range parent {
		if !cut.Inherits(ev) {
			t.Fatalf("the cut at reward, iteration 0, does not take %s over", ev.ID)
		}
		st.apply(ev)
	}
	st.apply(event(t, "b", schemas.RunStarted, schemas.RunStartedPayload{Seed: 1, Iterations: 2, Parent: "p", Branch: &schemas.BranchPoint{Stage: "reward", Iteration: 0, Continue: true}}))
	if got := decide(t, s, st); len(got) != 0 {
		t.Fatalf("decided before the branch scored iteration 0: %v", got)
	}
	// The parent's attempt has no routing: nothing to train, which the
	// branch's control finds once the branch has scored it.
	st.apply(event(t, "b-score", schemas.RewardScored, schemas.RewardScoredPayload{TaskID: "t", Purpose: schemas.PurposeTrain, Iteration: 0, PolicyVersion: 1}))
	got := decide(t, s, st)
	if len(got) != 1 || got[0].Type != schemas.RunFailed {
		t.Fatalf("after the branch's score: %v", got)
	}
	var p schemas.RunCompletedPayload
	if err := got[0].Decode(&p); err != nil || p.Iterations != 0 || !strings.Contains(p.Reason, "iteration 0") {
		t.Fatalf("%+v %v", p, err)
	}
}

// Fine-tuning waits until every demonstration is scored or has failed,
// and trains only on those that solved their task; with sft_shuffle it
// asks for the passes over them in an order drawn from the run seed.
func TestFineTuningWaitsForTheDemonstrationsScores(t *testing.T) {
	for _, shuffle := range []bool{false, true} {
		t.Run(fmt.Sprint("shuffle=", shuffle), func(t *testing.T) { fineTuningWaits(t, shuffle) })
	}
}

func fineTuningWaits(t *testing.T, shuffle bool) {
	c := testConfig()
	c.SFTSteps, c.EvalSuite, c.EvalBaseline, c.SFTShuffle = 10, "", false, shuffle
	s := &stage{cfg: StageConfig{Config: c}}
	st := newRunState("r")
	st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 7}))
	st.apply(event(t, "sealed", schemas.PoolSealed, schemas.PoolSealedPayload{PoolVersion: 1, TaskIDs: []string{"a", "b", "c", "d"}}))
	for _, ev := range decide(t, s, st) {
		st.apply(ev)
	}
	for _, task := range []string{"a", "b", "c", "d"} {
		st.apply(event(t, "demo-"+task, schemas.RolloutCompleted, schemas.RolloutCompletedPayload{TaskID: task, Purpose: "sft",
			TokenRows: schemas.FileRef{Key: "tokens-" + task}}))
	}
	if got := decide(t, s, st); len(got) != 0 {
		t.Fatalf("with no demonstration scored: %v", got)
	}
	st.apply(event(t, "score-a", schemas.RewardScored, schemas.RewardScoredPayload{TaskID: "a", Purpose: "sft", Passed: 2, Total: 2}))
	st.apply(event(t, "score-b", schemas.RewardScored, schemas.RewardScoredPayload{TaskID: "b", Purpose: "sft", Passed: 1, Total: 2}))
	st.apply(event(t, "score-c", schemas.RewardScored, schemas.RewardScoredPayload{TaskID: "c", Purpose: "sft", Passed: 2, Total: 2}))
	if got := decide(t, s, st); len(got) != 0 {
		t.Fatalf("with d's score outstanding: %v", got)
	}
	st.apply(event(t, "score-d-failed", engine.FailedType(schemas.RolloutCompleted), engine.Failure{EventID: "demo-d"}))
	got := decide(t, s, st)
	if len(got) != 1 || got[0].Type != schemas.SFTRequested {
		t.Fatalf("after every outcome: %v", got)
	}
	var req schemas.SFTRequestedPayload
	if err := got[0].Decode(&req); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range req.Data {
		keys = append(keys, f.Key)
	}
	if strings.Join(keys, ",") != "tokens-a,tokens-c" || req.Unsolved != 1 {
		t.Fatalf("fine-tuning on %v with %d unsolved; want tokens-a,tokens-c and 1", keys, req.Unsolved)
	}
	if want := map[bool]uint64{false: 0, true: 7}[shuffle]; req.Seed != want {
		t.Fatalf("sft_shuffle %v: order seed %d, want %d", shuffle, req.Seed, want)
	}
}

// With rl_tasks, the iterations train only on tasks fine-tuning never
// demonstrated, the same ones after a restart; without it, both see the
// whole pool.
func TestRLTasksAreKeptOutOfTheDemonstrations(t *testing.T) {
	pool := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	purposeTasks := func(evs []engine.Event, purpose string) map[string]bool {
		tasks := map[string]bool{}
		for _, ev := range evs {
			var p schemas.RolloutRequestedPayload
			if ev.Type == schemas.RolloutRequested && ev.Decode(&p) == nil && p.Purpose == purpose {
				tasks[p.TaskID] = true
			}
		}
		return tasks
	}
	// play runs a sealed pool through fine-tuning to iteration 0's
	// requests and returns the demonstrated and the trained tasks.
	play := func(rlTasks int) (sft, train map[string]bool) {
		c := testConfig()
		c.SFTSteps, c.RLTasks, c.EvalSuite, c.EvalBaseline = 10, rlTasks, "", false
		s := &stage{cfg: StageConfig{Config: c}}
		st := newRunState("r")
		st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 7}))
		st.apply(event(t, "sealed", schemas.PoolSealed, schemas.PoolSealedPayload{PoolVersion: 1, TaskIDs: pool}))
		demos := decide(t, s, st)
		sft = purposeTasks(demos, "sft")
		for _, ev := range demos {
			st.apply(ev)
		}
		for task := range sft {
			st.apply(event(t, "demo-"+task, schemas.RolloutCompleted, schemas.RolloutCompletedPayload{TaskID: task, Purpose: "sft"}))
			st.apply(event(t, "score-"+task, schemas.RewardScored, schemas.RewardScoredPayload{TaskID: task, Purpose: "sft", Passed: 1, Total: 1}))
		}
		asked := decide(t, s, st)
		if len(asked) != 1 || asked[0].Type != schemas.SFTRequested {
			t.Fatalf("rl_tasks %d: after every demonstration: %v", rlTasks, asked)
		}
		var req schemas.SFTRequestedPayload
		if err := asked[0].Decode(&req); err != nil || len(req.Data) != len(sft) {
			t.Fatalf("rl_tasks %d: fine-tuning on %d demonstrations, want %d (%v)", rlTasks, len(req.Data), len(sft), err)
		}
		st.apply(asked[0])
		st.apply(event(t, "sft-done", schemas.SFTCompleted, schemas.SFTCompletedPayload{PolicyVersion: 1}))
		// A restarted control folds the same events and must divide the
		// pool the same way.
		fresh := newRunState("r")
		fresh.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 7}))
		fresh.apply(event(t, "sealed", schemas.PoolSealed, schemas.PoolSealedPayload{PoolVersion: 1, TaskIDs: pool}))
		if again := purposeTasks(decide(t, &stage{cfg: s.cfg}, fresh), "sft"); len(again) != len(sft) {
			t.Fatalf("rl_tasks %d: a restarted control demonstrates %v, before %v", rlTasks, again, sft)
		}
		return sft, purposeTasks(decide(t, s, st), "train")
	}

	sft, train := play(3)
	if len(sft) != 5 || len(train) != 3 {
		t.Fatalf("rl_tasks 3 of 8: %d demonstrated, %d trained", len(sft), len(train))
	}
	for task := range train {
		if sft[task] {
			t.Fatalf("task %s is demonstrated and trained on", task)
		}
	}
	sft, train = play(0)
	if len(sft) != len(pool) || len(train) != len(pool) {
		t.Fatalf("rl_tasks 0: %d demonstrated, %d trained, want the pool's %d each", len(sft), len(train), len(pool))
	}
	// More than the pool keeps one task to fine-tune on.
	if sft, train = play(100); len(sft) != 1 || len(train) != len(pool)-1 {
		t.Fatalf("rl_tasks 100 of 8: %d demonstrated, %d trained", len(sft), len(train))
	}
}

// With skip_uniform, an iteration after the first draws its tasks from
// those whose last group did not earn one reward throughout, and tops
// the draw up from the uniform ones only when too few others are left;
// a restarted control folding the same rewards draws the same tasks.
func TestSkipUniformDrawsInformativeTasks(t *testing.T) {
	pool := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	fold := func(rewards map[string][]float64) *runState {
		st := newRunState("r")
		st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 7}))
		st.apply(event(t, "sealed", schemas.PoolSealed, schemas.PoolSealedPayload{PoolVersion: 1, TaskIDs: pool}))
		for task, rs := range rewards {
			for a, r := range rs {
				st.apply(event(t, fmt.Sprintf("score-%s-%d", task, a), schemas.RewardScored, schemas.RewardScoredPayload{
					TaskID: task, Attempt: a, Purpose: schemas.PurposeTrain, Iteration: 0, Reward: r}))
			}
		}
		return st
	}
	c := testConfig()
	c.TasksPerIteration, c.SkipUniform = 3, true
	s := &stage{cfg: StageConfig{Config: c}}
	// Five tasks earned one reward on every attempt (solved or failed
	// alike); c earned two, h one scored attempt (not judged), and f, g
	// were not drawn.
	rewards := map[string][]float64{"a": {2, 2}, "b": {0, 0, 0}, "c": {1, 3}, "d": {4, 4}, "e": {1, 1}, "h": {2}}
	st := fold(rewards)
	got := s.tasksFor(st, 1)
	if len(got) != 3 {
		t.Fatalf("drew %v", got)
	}
	for _, task := range got {
		if !slices.Contains([]string{"c", "f", "g", "h"}, task) {
			t.Fatalf("drew %v: %s's last group earned one reward", got, task)
		}
	}
	if again := s.tasksFor(fold(rewards), 1); !slices.Equal(again, got) {
		t.Fatalf("a restarted control draws %v, before %v", again, got)
	}
	// The first iteration has nothing to go on, and without the setting
	// every later one draws as it does.
	plain := &stage{cfg: StageConfig{Config: testConfig()}}
	plain.cfg.Config.TasksPerIteration = 3
	if first, want := s.tasksFor(st, 0), plain.tasksFor(st, 0); !slices.Equal(first, want) {
		t.Fatalf("iteration 0 draws %v, without skip_uniform %v", first, want)
	}
	// Only c and f–h are open: four tasks wanted, one is topped up from
	// the uniform ones.
	s.cfg.Config.TasksPerIteration = 5
	got = s.tasksFor(st, 1)
	uniform := 0
	for _, task := range got {
		if slices.Contains([]string{"a", "b", "d", "e"}, task) {
			uniform++
		}
	}
	if len(got) != 5 || uniform != 1 || !slices.IsSortedFunc(got, func(a, b string) int { return strings.Compare(a, b) }) {
		t.Fatalf("drew %v: want c, f, g, h and one uniform task, in pool order", got)
	}
}

// With fresh_tasks, an iteration draws the tasks no iteration has drawn
// before others while enough are left; with skip_uniform too, the drawn
// ones whose group differed come next and the uniform ones last.
func TestFreshTasksDrawsUndrawnTasksFirst(t *testing.T) {
	pool := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	st := newRunState("r")
	st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 7}))
	st.apply(event(t, "sealed", schemas.PoolSealed, schemas.PoolSealedPayload{PoolVersion: 1, TaskIDs: pool}))
	// Iteration 0 drew a–e: a, b earned one reward, c–e two.
	for task, rs := range map[string][]float64{"a": {2, 2}, "b": {0, 0}, "c": {1, 3}, "d": {0, 2}, "e": {1, 0}} {
		for a, r := range rs {
			st.apply(event(t, fmt.Sprintf("score-%s-%d", task, a), schemas.RewardScored, schemas.RewardScoredPayload{
				TaskID: task, Attempt: a, Purpose: schemas.PurposeTrain, Iteration: 0, Reward: r}))
		}
	}
	draw := func(n int, skip bool) []string {
		c := testConfig()
		c.TasksPerIteration, c.FreshTasks, c.SkipUniform = n, true, skip
		return (&stage{cfg: StageConfig{Config: c}}).tasksFor(st, 1)
	}
	if got := draw(2, false); len(got) != 2 || !slices.Contains([]string{"f", "g", "h"}, got[0]) || !slices.Contains([]string{"f", "g", "h"}, got[1]) {
		t.Fatalf("drew %v, want two of the undrawn f, g, h", got)
	}
	// Five wanted: f, g, h and two of the drawn; with skip_uniform, two of
	// c–e rather than a or b.
	got := draw(5, true)
	if len(got) != 5 || !slices.IsSorted(got) {
		t.Fatalf("drew %v", got)
	}
	for _, task := range got {
		if task == "a" || task == "b" {
			t.Fatalf("drew %v: %s's group earned one reward while c–e's did not", got, task)
		}
	}
	for _, task := range []string{"f", "g", "h"} {
		if !slices.Contains(got, task) {
			t.Fatalf("drew %v without the undrawn %s", got, task)
		}
	}
	if again := draw(5, true); !slices.Equal(again, got) {
		t.Fatalf("drawn again: %v, before %v", again, got)
	}
}

// A continued branch whose configuration asks for more attempts per
// iteration than its parent's did expects, at the iteration it took over,
// the attempts the parent requested: counting them from its own
// configuration, it waited for attempts nobody would ever request.
func TestBranchIterationExpectsWhatItTookOver(t *testing.T) {
	c := testConfig()
	c.Iterations, c.Attempts, c.SFTSteps = 2, 4, 2
	s := &stage{cfg: StageConfig{Config: c}}
	cut, err := lineage.NewCut(schemas.BranchPoint{Stage: "reward", Iteration: 0, Continue: true})
	if err != nil {
		t.Fatal(err)
	}
	st := newRunState("r")
	for _, ev := range parentHistory(t, "p") {
		if !cut.Inherits(ev) {
			t.Fatalf("the cut at reward, iteration 0, does not take %s over", ev.ID)
		}
		st.apply(ev)
	}
	st.apply(event(t, "b", schemas.RunStarted, schemas.RunStartedPayload{Seed: 1, Iterations: 2, Parent: "p", Branch: &schemas.BranchPoint{Stage: "reward", Iteration: 0, Continue: true}}))
	st.apply(event(t, "b-score", schemas.RewardScored, schemas.RewardScoredPayload{TaskID: "t", Purpose: schemas.PurposeTrain, Iteration: 0, PolicyVersion: 1}))
	// The one attempt, scored, settles iteration 0; it has no routing, so
	// there is nothing to train and the run fails saying so.
	got := decide(t, s, st)
	if len(got) != 1 || got[0].Type != schemas.RunFailed {
		t.Fatalf("iteration 0 of one attempt taken over, four configured: decided %v", got)
	}
}

// parentHistory is a parent run's history up to iteration 0's one
// attempt, rolled out: a sealed pool of one task, fine-tuned, both
// policies evaluated; its events are run's.
func parentHistory(t *testing.T, run string) []engine.Event {
	evs := []engine.Event{
		event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 1}),
		event(t, "sealed", schemas.PoolSealed, schemas.PoolSealedPayload{PoolVersion: 1, TaskIDs: []string{"t"}}),
		event(t, "ev0-asked", schemas.EvalRequested, schemas.EvalRequestedPayload{PolicyVersion: 0}),
		event(t, "ev0-end", schemas.EvalCompleted, schemas.EvalCompletedPayload{PolicyVersion: 0}),
		event(t, "sft-req", schemas.SFTRequested, schemas.SFTRequestedPayload{}),
		event(t, "sft-done", schemas.SFTCompleted, schemas.SFTCompletedPayload{PolicyVersion: 1}),
		event(t, "ev1-asked", schemas.EvalRequested, schemas.EvalRequestedPayload{PolicyVersion: 1}),
		event(t, "ev1-end", schemas.EvalCompleted, schemas.EvalCompletedPayload{PolicyVersion: 1}),
		event(t, "it0-start", schemas.IterationStarted, schemas.IterationStartedPayload{Iteration: 0, PolicyVersion: 1}),
		event(t, "it0-req", schemas.RolloutRequested, schemas.RolloutRequestedPayload{TaskID: "t", Purpose: schemas.PurposeTrain, PolicyVersion: 1}),
		event(t, "it0-done", schemas.RolloutCompleted, schemas.RolloutCompletedPayload{TaskID: "t", Purpose: schemas.PurposeTrain, PolicyVersion: 1}),
	}
	for i := range evs {
		evs[i].Run = run
	}
	return evs
}

// With pool_seed, runs of different seeds ask synthesis for the same
// pool and divide it alike, demonstrations and their seeds included;
// without it, the run seed draws both.
func TestPoolSeedFixesTheDataset(t *testing.T) {
	var pool []string
	for i := range 20 {
		pool = append(pool, fmt.Sprintf("t%02d", i))
	}
	// dataset returns the synthesis seed asked for and the demonstrations
	// (task and seed) of a run with run seed seed.
	dataset := func(seed, poolSeed uint64) (uint64, map[string]uint64) {
		c := testConfig()
		c.SFTSteps, c.RLTasks, c.EvalSuite, c.EvalBaseline, c.PoolSeed = 10, 5, "", false, poolSeed
		s := &stage{cfg: StageConfig{Config: c}}
		st := newRunState("r")
		st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: seed}))
		var req schemas.SynthRequestedPayload
		if got := decide(t, s, st); len(got) != 1 || got[0].Decode(&req) != nil {
			t.Fatalf("seed %d: %v", seed, got)
		}
		st = newRunState("r")
		st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: seed}))
		st.apply(event(t, "sealed", schemas.PoolSealed, schemas.PoolSealedPayload{PoolVersion: 1, TaskIDs: pool}))
		demos := map[string]uint64{}
		for _, ev := range decide(t, s, st) {
			var p schemas.RolloutRequestedPayload
			if ev.Type == schemas.RolloutRequested && ev.Decode(&p) == nil && p.Purpose == "sft" {
				demos[p.TaskID] = p.Seed
			}
		}
		if len(demos) != len(pool)-5 {
			t.Fatalf("seed %d: %d demonstrations of %d tasks, 5 kept for RL", seed, len(demos), len(pool))
		}
		return req.Seed, demos
	}
	s7, d7 := dataset(7, 42)
	s8, d8 := dataset(8, 42)
	if s7 != 42 || s8 != 42 || !maps.Equal(d7, d8) {
		t.Fatalf("pool seed 42: synthesis seeds %d and %d, demonstrations %v and %v", s7, s8, d7, d8)
	}
	s7, d7 = dataset(7, 0)
	s8, d8 = dataset(8, 0)
	if s7 != 7 || s8 != 8 || maps.Equal(d7, d8) {
		t.Fatalf("no pool seed: synthesis seeds %d and %d, demonstrations %v and %v", s7, s8, d7, d8)
	}
}
