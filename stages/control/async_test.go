package control

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/unstored"
	"github.com/t1pipe/t1/schemas"
)

// With training.max_staleness 1 the next iteration plays while the
// current one trains, and a batch whose attempts all finished early still
// waits for the update before it: the test plays iteration 1 to its end
// before iteration 0's first attempt is scored. Iteration i samples the
// policy of iteration i−1−k and its batch trains the newest, k versions
// on; with k = 0 nothing starts before the update it would sample.
func TestStalenessBound(t *testing.T) {
	for _, k := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			c := testConfig()
			c.Iterations, c.Attempts, c.EvalSuite, c.EvalBaseline, c.MaxStaleness = 4, 1, "", false, k
			c.Model = schemas.ModelDims{Vocab: 512, Layers: 2, TopK: 2, Experts: 8}
			s := &stage{cfg: StageConfig{Store: testinfra.Store(t), Config: c}}
			st := newRunState("r")
			st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 1}))
			st.apply(event(t, "sr", schemas.SynthRequested, schemas.SynthRequestedPayload{Round: 0, Seeds: 1}))
			st.apply(event(t, "aud", schemas.TaskAudited, schemas.TaskAuditedPayload{TaskID: "t1", Round: 0, Decision: "accept"}))
			st.apply(event(t, "seal", schemas.PoolSealed, schemas.PoolSealedPayload{TaskIDs: []string{"t1"}}))

			// step decides until nothing more is decided, folding each
			// decision, and returns them.
			step := func() []engine.Event {
				var all []engine.Event
				for {
					got := decide(t, s, st)
					if len(got) == 0 {
						return all
					}
					for _, ev := range got {
						st.apply(ev)
					}
					all = append(all, got...)
				}
			}
			started := map[int]int64{} // iteration → the version it samples
			var batches []schemas.BatchReadyPayload
			note := func(evs []engine.Event) {
				for _, ev := range evs {
					switch ev.Type {
					case schemas.IterationStarted:
						var p schemas.IterationStartedPayload
						if err := ev.Decode(&p); err != nil {
							t.Fatal(err)
						}
						started[p.Iteration] = p.PolicyVersion
					case schemas.BatchReady:
						var p schemas.BatchReadyPayload
						if err := ev.Decode(&p); err != nil {
							t.Fatal(err)
						}
						batches = append(batches, p)
					}
				}
			}
			finish := func(i int) {
				id := fmt.Sprintf("%d", i)
				ref := func(tb schemas.Table) schemas.FileRef { return unstored.Ref("r", tb, tb.Name+id) }
				st.apply(event(t, "done"+id, schemas.RolloutCompleted, schemas.RolloutCompletedPayload{
					TaskID: "t1", Purpose: "train", Iteration: i, PolicyVersion: started[i], Tokens: 5,
					TokenRows: ref(schemas.TokensTable), RoutingRows: ref(schemas.RoutingTable), Trajectory: ref(schemas.TrajectoriesTable)}))
				st.apply(event(t, "scored"+id, schemas.RewardScored, schemas.RewardScoredPayload{
					TaskID: "t1", Purpose: "train", Iteration: i, PolicyVersion: started[i], Reward: 1, Rewards: ref(schemas.RewardsTable)}))
			}
			update := func(i int) {
				st.apply(event(t, fmt.Sprintf("up%d", i), schemas.PolicyUpdated, schemas.PolicyUpdatedPayload{Iteration: i, PolicyVersion: int64(i + 1)}))
			}

			note(step())
			// Before any update, iterations 0..k play, all on the base.
			if len(started) != k+1 {
				t.Fatalf("before any update %d iterations started, want %d: %v", len(started), k+1, started)
			}
			// The last of them finishes first; its batch must wait.
			finish(k)
			note(step())
			if k > 0 && len(batches) != 0 {
				t.Fatalf("iteration %d's batch went before iteration 0's: %+v", k, batches)
			}
			for i := 0; i < c.Iterations; i++ {
				if i != k {
					if _, ok := started[i]; !ok {
						t.Fatalf("iteration %d never started (started %v)", i, started)
					}
					finish(i)
				}
				note(step())
				if len(batches) != i+1 {
					t.Fatalf("after iteration %d played: batches %+v", i, batches)
				}
				if i+1+k < c.Iterations {
					if _, ok := started[i+1+k]; ok {
						t.Fatalf("iteration %d started before the update of iteration %d it samples", i+1+k, i)
					}
				}
				update(i)
				note(step())
				if i+1+k < c.Iterations && started[i+1+k] != int64(i+1) {
					t.Fatalf("iteration %d samples version %d, want %d", i+1+k, started[i+1+k], i+1)
				}
			}
			for i, b := range batches {
				want := int64(min(i, k))
				if b.Iteration != i || b.PolicyVersion != started[i] || b.PolicyVersion+want != int64(i) {
					t.Fatalf("batch %d: %+v, sampled by %d, want staleness %d", i, b, started[i], want)
				}
				m, err := schemas.ReadManifest(context.Background(), s.cfg.Store, b.Manifest)
				if err != nil {
					t.Fatal(err)
				}
				if m.Staleness != want {
					t.Fatalf("batch %d manifest staleness %d, want %d", i, m.Staleness, want)
				}
			}
		})
	}
}

// With a staleness bound, an iteration's draw of tasks (skip_uniform,
// fresh_tasks) judges only the iterations complete when it starts: what a
// still-playing one has scored so far would make the draw depend on which
// attempt finished first.
func TestStaleDrawJudgesCompleteIterationsOnly(t *testing.T) {
	c := testConfig()
	c.TasksPerIteration, c.Attempts, c.SkipUniform, c.FreshTasks, c.MaxStaleness = 2, 2, true, true, 1
	s := &stage{cfg: StageConfig{Config: c}}
	st := newRunState("r")
	st.apply(event(t, "start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 3}))
	pool := []string{"a", "b", "c", "d", "e", "f"}
	st.apply(event(t, "seal", schemas.PoolSealed, schemas.PoolSealedPayload{TaskIDs: pool}))
	score := func(i int, task string, reward float64, a int) {
		st.apply(event(t, fmt.Sprintf("s%d%s%d", i, task, a), schemas.RewardScored,
			schemas.RewardScoredPayload{TaskID: task, Attempt: a, Purpose: "train", Iteration: i, Reward: reward}))
	}
	for _, task := range s.tasksFor(st, 0) {
		score(0, task, 1, 0)
		score(0, task, 1, 1) // uniform
	}
	before := s.tasksFor(st, 2)
	// Iteration 1 scores some of its attempts: iteration 2 (which samples
	// iteration 0's policy) must draw as before.
	for _, task := range s.tasksFor(st, 1) {
		score(1, task, 0, 0)
		score(1, task, 1, 1)
	}
	if after := s.tasksFor(st, 2); !slices.Equal(before, after) {
		t.Fatalf("iteration 2 drew %v, then %v once iteration 1 scored", before, after)
	}
}
