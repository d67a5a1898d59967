package lineage

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/schemas"
)

// parentLog is a finished run of one task, one attempt, fine-tuning and
// two iterations, each event's id naming it; the rollout of iteration 1
// failed once before it completed.
func parentLog(t *testing.T) []engine.Event {
	var evs []engine.Event
	add := func(id, typ string, p any) { evs = append(evs, event(t, id, typ, p)) }
	attempt := func(prefix, purpose string, it int, v int64) {
		add(prefix+"-req", schemas.RolloutRequested, schemas.RolloutRequestedPayload{TaskID: "t", Purpose: purpose, Iteration: it, PolicyVersion: v})
		add(prefix+"-done", schemas.RolloutCompleted, schemas.RolloutCompletedPayload{TaskID: "t", Purpose: purpose, Iteration: it, PolicyVersion: v})
		add(prefix+"-score", schemas.RewardScored, schemas.RewardScoredPayload{TaskID: "t", Purpose: purpose, Iteration: it, PolicyVersion: v})
	}
	eval := func(v int64) {
		add(fmt.Sprintf("ev%d-asked", v), schemas.EvalRequested, schemas.EvalRequestedPayload{PolicyVersion: v})
		attempt(fmt.Sprintf("ev%d-a", v), schemas.PurposeEval, 0, v)
		add(fmt.Sprintf("ev%d-end", v), schemas.EvalCompleted, schemas.EvalCompletedPayload{PolicyVersion: v})
	}
	add("start", schemas.RunStarted, schemas.RunStartedPayload{Seed: 1})
	add("synth", schemas.SynthRequested, schemas.SynthRequestedPayload{Seeds: 1})
	add("audit", schemas.TaskAudited, schemas.TaskAuditedPayload{TaskID: "t", Decision: "accept"})
	add("sealed", schemas.PoolSealed, schemas.PoolSealedPayload{PoolVersion: 1, TaskIDs: []string{"t"}})
	eval(0)
	attempt("demo", "sft", 0, 0)
	add("sft-req", schemas.SFTRequested, schemas.SFTRequestedPayload{})
	add("sft-done", schemas.SFTCompleted, schemas.SFTCompletedPayload{PolicyVersion: 1})
	eval(1)
	for i, v := range []int64{1, 2} {
		p := fmt.Sprintf("it%d", i)
		add(p+"-start", schemas.IterationStarted, schemas.IterationStartedPayload{Iteration: i, PolicyVersion: v})
		if i == 1 {
			add(p+"-lost", schemas.RolloutRequested, schemas.RolloutRequestedPayload{TaskID: "t", Attempt: 1, Purpose: schemas.PurposeTrain, Iteration: i, PolicyVersion: v})
			add(p+"-lost-failed", engine.FailedType(schemas.RolloutRequested), engine.Failure{EventID: p + "-lost", Type: schemas.RolloutRequested})
		}
		attempt(p, schemas.PurposeTrain, i, v)
		add(p+"-batch", schemas.BatchReady, schemas.BatchReadyPayload{Iteration: i, PolicyVersion: v})
		add(p+"-critic", schemas.CriticUpdated, schemas.CriticUpdatedPayload{Iteration: i, PolicyVersion: v})
		add(p+"-update", schemas.PolicyUpdated, schemas.PolicyUpdatedPayload{Iteration: i, PolicyVersion: v + 1})
	}
	eval(3)
	add("end", schemas.RunCompleted, schemas.RunCompletedPayload{})
	return evs
}

// What a branch takes over and what its stage re-runs, for every stage it
// can continue from.
func TestCutInheritsUpstreamAndReplaysTheStagesInputs(t *testing.T) {
	pre := []string{"start", "synth", "audit", "sealed", "ev0-asked", "ev0-a-req", "ev0-a-done", "ev0-a-score", "ev0-end",
		"demo-req", "demo-done", "demo-score", "sft-req"}
	afterSFT := append(slices.Clone(pre), "sft-done", "ev1-asked", "ev1-a-req", "ev1-a-done", "ev1-a-score", "ev1-end")
	iter0 := []string{"it0-start", "it0-req", "it0-done", "it0-score", "it0-batch", "it0-critic", "it0-update"}
	for _, c := range []struct {
		stage     string
		iteration int
		inherits  []string
		replays   []string
	}{
		{"sft", 0, pre, []string{"sft-req"}},
		{"rollout", 0, append(slices.Clone(afterSFT), "it0-start", "it0-req"), []string{"it0-req"}},
		{"reward", 1, append(append(slices.Clone(afterSFT), iter0...), "it1-start", "it1-lost", "it1-lost-failed", "it1-req", "it1-done"), []string{"it1-done"}},
		// The failed request of iteration 1 is the rollout stage's outcome:
		// a branch re-running rollout re-runs the request too.
		{"rollout", 1, append(append(slices.Clone(afterSFT), iter0...), "it1-start", "it1-lost", "it1-req"), []string{"it1-lost", "it1-req"}},
		{"critic", 0, append(slices.Clone(afterSFT), "it0-start", "it0-req", "it0-done", "it0-score", "it0-batch"), []string{"it0-batch"}},
		{"ppo", 0, append(slices.Clone(afterSFT), "it0-start", "it0-req", "it0-done", "it0-score", "it0-batch", "it0-critic"), []string{"it0-critic"}},
	} {
		t.Run(fmt.Sprintf("%s@%d", c.stage, c.iteration), func(t *testing.T) {
			cut, err := NewCut(schemas.BranchPoint{Stage: c.stage, Iteration: c.iteration, Continue: true})
			if err != nil {
				t.Fatal(err)
			}
			var inherits, replays []string
			for _, ev := range parentLog(t) {
				if cut.Inherits(ev) {
					inherits = append(inherits, ev.ID)
					if cut.Replays(ev) {
						replays = append(replays, ev.ID)
					}
				}
			}
			if !slices.Equal(inherits, c.inherits) {
				t.Errorf("inherits\n%v, want\n%v", inherits, c.inherits)
			}
			if !slices.Equal(replays, c.replays) {
				t.Errorf("replays %v, want %v", replays, c.replays)
			}
		})
	}
	// eval at iteration 2 takes over the whole training and the
	// evaluations of v0 and v1, and re-runs v3's from its request.
	cut, err := NewCut(schemas.BranchPoint{Stage: "eval", Iteration: 2, Continue: true})
	if err != nil {
		t.Fatal(err)
	}
	var skipped, replays []string
	for _, ev := range parentLog(t) {
		if !cut.Inherits(ev) {
			skipped = append(skipped, ev.ID)
		} else if cut.Replays(ev) {
			replays = append(replays, ev.ID)
		}
	}
	if want := []string{"ev3-a-req", "ev3-a-done", "ev3-a-score", "ev3-end", "end"}; !slices.Equal(skipped, want) {
		t.Errorf("eval@2 leaves %v, want %v", skipped, want)
	}
	if !slices.Equal(replays, []string{"ev3-asked"}) {
		t.Errorf("eval@2 re-runs %v", replays)
	}
	if _, err := NewCut(schemas.BranchPoint{Stage: "synth", Continue: true}); err == nil {
		t.Error("a branch continues from synth")
	}
}

func event(t *testing.T, id, typ string, payload any) engine.Event {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return engine.Event{ID: id, Type: typ, Run: "r", Payload: b}
}
