package control

import (
	"encoding/json"
	"sort"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/schemas"
)

// sftIteration marks demonstration attempts in the request map.
const sftIteration = -1

// round is one synthesis round.
type round struct {
	requested bool
	failed    bool // synth.requested itself failed
	expected  int
	settled   int
	accepted  []string
}

// iteration is one training iteration.
type iteration struct {
	started  bool
	version  int64
	expected int
	failed   int
	// inherited counts the attempts a branch took over from its parent
	// at this iteration: what the parent's configuration asked for, which
	// the branch's may not.
	inherited int
	// completed and scored are keyed by attempt name (task/attempt).
	completed map[string]schemas.RolloutCompletedPayload
	scored    map[string]schemas.RewardScoredPayload
	batch     bool
	batchFail bool
	updated   bool
	newVer    int64
}

// runState is the fold of one run.
type runState struct {
	// id is the run folded; events of other runs are its lineage's,
	// taken over at a branch point.
	id      string
	started bool
	seed    uint64
	// branch is the run's branch point when it is a branch; a branch
	// trains what its run.started froze, iterations and model shape.
	branch      *schemas.BranchPoint
	iterations  int
	model       schemas.ModelDims
	rounds      map[int]*round
	candidates  map[string]int    // synth.candidate event id → round
	synthesized map[string]string // task.synthesized event id → task id
	taskRound   map[string]int    // task id → round
	taskRef     map[string]schemas.FileRef
	taskBundle  map[string]schemas.ObjectRef
	sealed      bool
	excluded    int
	// Supervised initialisation: demonstrations requested, their token
	// objects and whether they solved their task, by task; failures (of
	// the replay or its scoring); and the outcome.
	sftRequested int
	sftData      map[string]schemas.FileRef
	sftSolved    map[string]bool
	sftFailed    int
	sftAsked     bool
	sftDone      bool
	sftVersion   int64
	pool         []string
	split        *poolSplit // the pool's division, once sealed (stage.split)
	iters        map[int]*iteration
	requests     map[string]int   // rollout.requested event id → iteration (train)
	evals        map[int64]string // policy version → "requested" | "completed" | "failed"
	evalReqs     map[string]int64 // eval.requested event id → version
	evalIter     map[int64]int    // policy version → the partition its evaluation writes
	finished     bool
	// compacted holds the partitions (Table.Dir-NNNN) this process has
	// compacted; a restarted one compacts them again, which finishes what
	// a crash left and is otherwise a listing.
	compacted map[string]bool
}

func newRunState(id string) *runState {
	return &runState{
		id:     id,
		rounds: map[int]*round{}, candidates: map[string]int{}, synthesized: map[string]string{},
		taskRound: map[string]int{}, taskRef: map[string]schemas.FileRef{}, taskBundle: map[string]schemas.ObjectRef{},
		iters:    map[int]*iteration{},
		requests: map[string]int{}, evals: map[int64]string{}, evalReqs: map[string]int64{}, evalIter: map[int64]int{},
		sftData: map[string]schemas.FileRef{}, sftSolved: map[string]bool{},
	}
}

func (s *runState) round(r int) *round {
	if s.rounds[r] == nil {
		s.rounds[r] = &round{}
	}
	return s.rounds[r]
}

func (s *runState) iter(i int) *iteration {
	if s.iters[i] == nil {
		s.iters[i] = &iteration{completed: map[string]schemas.RolloutCompletedPayload{}, scored: map[string]schemas.RewardScoredPayload{}}
	}
	return s.iters[i]
}

func attemptKey(task string, attempt int) string {
	b, _ := json.Marshal([]any{task, attempt})
	return string(b)
}

// apply folds one event. Unknown types and undecodable payloads are
// ignored: control must not stall on what another stage got wrong, and
// the failing stage has reported it.
func (s *runState) apply(ev engine.Event) {
	switch ev.Type {
	case schemas.RunStarted:
		var p schemas.RunStartedPayload
		if ev.Decode(&p) == nil {
			s.started, s.seed = true, p.Seed
			s.branch, s.iterations, s.model = p.Branch, p.Iterations, p.Model
		}
	case schemas.SynthRequested:
		var p schemas.SynthRequestedPayload
		if ev.Decode(&p) == nil {
			r := s.round(p.Round)
			r.requested = true
			if len(p.SeedIDs) == 0 {
				r.expected = p.Seeds
			} else {
				r.expected = len(p.SeedIDs) * p.PerSeed
			}
		}
	case engine.FailedType(schemas.SynthRequested):
		// The whole round failed before fanning out: it settles empty.
		for _, r := range s.rounds {
			if r.requested && r.settled == 0 && !r.failed {
				r.failed = true
			}
		}
	case schemas.SynthCandidate:
		var p schemas.SynthCandidatePayload
		if ev.Decode(&p) == nil {
			s.candidates[ev.ID] = p.Round
		}
	case engine.FailedType(schemas.SynthCandidate):
		var f engine.Failure
		if ev.Decode(&f) == nil {
			if r, ok := s.candidates[f.EventID]; ok {
				s.round(r).settled++
			}
		}
	case schemas.SynthDiscarded:
		var p schemas.SynthDiscardedPayload
		if ev.Decode(&p) == nil {
			s.round(p.Round).settled++
		}
	case schemas.TaskSynthesized:
		var p schemas.TaskSynthesizedPayload
		if ev.Decode(&p) == nil {
			s.synthesized[ev.ID] = p.TaskID
			s.taskRound[p.TaskID] = p.Round
			s.taskRef[p.TaskID] = p.Task
			s.taskBundle[p.TaskID] = p.Bundle
		}
	case engine.FailedType(schemas.TaskSynthesized):
		var f engine.Failure
		if ev.Decode(&f) == nil {
			if id, ok := s.synthesized[f.EventID]; ok {
				s.round(s.taskRound[id]).settled++
			}
		}
	case schemas.TaskAudited:
		var p schemas.TaskAuditedPayload
		if ev.Decode(&p) == nil {
			r := s.round(p.Round)
			r.settled++
			if p.Decision == "accept" {
				r.accepted = append(r.accepted, p.TaskID)
				sort.Strings(r.accepted)
			}
		}
	case schemas.PoolSealed:
		var p schemas.PoolSealedPayload
		if ev.Decode(&p) == nil {
			s.sealed, s.pool = true, p.TaskIDs
		}
	case schemas.RolloutRequested:
		var p schemas.RolloutRequestedPayload
		if ev.Decode(&p) == nil && p.Purpose == "sft" {
			s.sftRequested++
			s.requests[ev.ID] = sftIteration
		}
		if ev.Decode(&p) == nil && p.Purpose == "train" {
			it := s.iter(p.Iteration)
			it.started = true
			it.version = p.PolicyVersion
			s.requests[ev.ID] = p.Iteration
			if ev.Run != s.id {
				it.inherited++
			}
		}
	case engine.FailedType(schemas.RolloutRequested), engine.FailedType(schemas.RolloutCompleted):
		// A rollout that failed, or its scoring: the attempt has its outcome.
		var f engine.Failure
		if ev.Decode(&f) == nil {
			if i, ok := s.requests[f.EventID]; ok && i == sftIteration {
				s.sftFailed++
			} else if ok {
				s.iter(i).failed++
			}
		}
	case schemas.RolloutCompleted:
		var p schemas.RolloutCompletedPayload
		if ev.Decode(&p) == nil && p.Purpose == "sft" {
			s.sftData[p.TaskID] = p.TokenRows
			s.requests[ev.ID] = sftIteration
		}
		if ev.Decode(&p) == nil && p.Purpose == "train" {
			s.iter(p.Iteration).completed[attemptKey(p.TaskID, p.Attempt)] = p
			s.requests[ev.ID] = p.Iteration
		}
	case schemas.RewardScored:
		var p schemas.RewardScoredPayload
		if ev.Decode(&p) == nil && p.Purpose == "sft" {
			s.sftSolved[p.TaskID] = p.Solved()
		}
		if ev.Decode(&p) == nil && p.Purpose == "train" {
			s.iter(p.Iteration).scored[attemptKey(p.TaskID, p.Attempt)] = p
		}
	case schemas.BatchReady:
		var p schemas.BatchReadyPayload
		if ev.Decode(&p) == nil {
			s.iter(p.Iteration).batch = true
		}
	case engine.FailedType(schemas.BatchReady), engine.FailedType(schemas.CriticUpdated):
		// The critic or the update failed for good: the run cannot go on.
		for _, it := range s.iters {
			if it.batch && !it.updated {
				it.batchFail = true
			}
		}
	case schemas.PolicyUpdated:
		var p schemas.PolicyUpdatedPayload
		if ev.Decode(&p) == nil {
			it := s.iter(p.Iteration)
			it.updated, it.newVer = true, p.PolicyVersion
		}
	case schemas.EvalRequested:
		var p schemas.EvalRequestedPayload
		if ev.Decode(&p) == nil {
			if s.evals[p.PolicyVersion] == "" {
				s.evals[p.PolicyVersion] = "requested"
			}
			s.evalReqs[ev.ID] = p.PolicyVersion
			s.evalIter[p.PolicyVersion] = p.Iteration
		}
	case engine.FailedType(schemas.EvalRequested):
		var f engine.Failure
		if ev.Decode(&f) == nil {
			if v, ok := s.evalReqs[f.EventID]; ok {
				s.evals[v] = "failed"
			}
		}
	case schemas.EvalCompleted:
		var p schemas.EvalCompletedPayload
		if ev.Decode(&p) == nil {
			s.evals[p.PolicyVersion] = "completed"
		}
	case schemas.SFTRequested:
		s.sftAsked = true
	case engine.FailedType(schemas.SFTRequested):
		s.sftDone = true // go on from the initial policy
	case schemas.SFTCompleted:
		var p schemas.SFTCompletedPayload
		if ev.Decode(&p) == nil {
			s.sftDone, s.sftVersion = true, p.PolicyVersion
		}
	case schemas.RunCompleted, schemas.RunFailed:
		s.finished = true
	}
}

// settled reports whether every candidate of the round has an outcome.
func (r *round) isSettled() bool {
	return r.requested && (r.failed || r.settled >= r.expected)
}

func (it *iteration) isSettled() bool {
	return it.started && len(it.scored)+it.failed >= it.expected
}

// sampleVersion is the policy iteration i samples with a staleness bound
// of k: the one iteration i−1−k made, or base when i ≤ k. ok is false
// while that iteration's update has not been folded yet.
func (s *runState) sampleVersion(i int, base int64, k int) (version int64, ok bool) {
	j := i - 1 - k
	if j < 0 {
		return base, true
	}
	prev := s.iter(j)
	return prev.newVer, prev.updated
}
