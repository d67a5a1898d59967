package lineage

import (
	"context"
	"fmt"
	"strings"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/schemas"
)

// A continued branch (schemas.BranchPoint.Continue) is its parent's run up
// to the branch point and a run of its own from there: control folds the
// parent's events that lie upstream of the point as if they were the
// branch's, then the branch's own, and decides from that as in any run.
//
// Where an event lies is its position in the recipe: the phase before the
// first iteration (synthesis, audit, the sealed pool, supervised
// fine-tuning) is iteration -1, and within an iteration each stage's
// outputs come one step after their inputs:
//
//	iteration -1  run.started 0 · synth.requested 1 · synth.candidate 2 · task.synthesized, synth.discarded 3 ·
//	              task.audited 4 · pool.sealed 5 · demonstrations: rollout.requested 6, rollout.completed 7,
//	              reward.scored 8 · sft.requested 9 · sft.completed 10
//	iteration i   iteration.started, rollout.requested 0 · rollout.completed 1 · reward.scored 2 · batch.ready 3 ·
//	              critic.updated 4 · policy.updated 5
//
// A <type>.failed event stands for the output its consumer did not make:
// one step after the event that failed. An evaluation of policy version v
// (eval.requested, its attempts, eval.completed) lies where v was made:
// v0 at the sealed pool, a fine-tuned version at sft.completed, an
// updated one at its iteration's policy.updated. run.completed and
// run.failed end the parent only.
//
// A branch that re-runs stage S at iteration I takes over every parent
// event before S's outputs at I, and re-runs S on S's inputs at I:
//
//	rollout (I, 1) · reward (I, 2) · critic (I, 4) · ppo (I, 5) · sft (-1, 10)
//
// eval is beside the training: a branch re-running it takes over the
// whole training and every evaluation of a version made before iteration I
// (I = 0: none), and re-runs the evaluations of the later versions from
// their eval.requested.
type position struct {
	iter, step int
	// version is the policy version of an evaluation's event; eval marks
	// one, evalStep its step (eval.requested 0, the attempts 1-3,
	// eval.completed 4).
	eval     bool
	version  int64
	evalStep int
	terminal bool
}

func (p position) before(q position) bool {
	return p.iter < q.iter || p.iter == q.iter && p.step < q.step
}

// Stages a branch can continue from, with the step their outputs take and
// the type of the inputs they re-run.
var branchStages = map[string]struct {
	step  int
	input string
}{
	"rollout": {1, schemas.RolloutRequested},
	"reward":  {2, schemas.RolloutCompleted},
	"critic":  {4, schemas.BatchReady},
	"ppo":     {5, schemas.CriticUpdated},
	"sft":     {10, schemas.SFTRequested},
	"eval":    {0, schemas.EvalRequested},
}

// ContinuableStages lists the stages a branch can re-run and continue
// from.
func ContinuableStages() []string {
	return []string{"rollout", "reward", "critic", "ppo", "sft", "eval"}
}

// Cut classifies a parent's events, in log order, against a branch point:
// which the branch takes over (Inherits) and which its replayed stage
// re-runs (Replays). It keeps what it has seen, so it must be shown every
// event of the parent's history (History) in order.
type Cut struct {
	stage string
	at    position // where the replayed stage's outputs go
	// evalFrom: evaluations of versions made at or after it are re-run
	// (stage eval).
	evalFrom position
	pos      map[string]position // event id → position, for failures
	made     map[int64]position  // policy version → where it was made
}

// NewCut returns the cut of b, a continued branch's point.
func NewCut(b schemas.BranchPoint) (*Cut, error) {
	bs, ok := branchStages[b.Stage]
	if !ok {
		return nil, fmt.Errorf("a branch continues from one of %v, not %q", ContinuableStages(), b.Stage)
	}
	if b.Iteration < 0 {
		return nil, fmt.Errorf("branch point: iteration %d", b.Iteration)
	}
	c := &Cut{stage: b.Stage, at: position{iter: b.Iteration, step: bs.step}, pos: map[string]position{}, made: map[int64]position{}}
	switch b.Stage {
	case "sft":
		c.at.iter = -1
	case "eval":
		c.evalFrom = position{iter: -2}
		if b.Iteration > 0 {
			c.evalFrom = position{iter: b.Iteration - 1, step: 5}
		}
	}
	return c, nil
}

// Inherits reports whether the branch takes ev over as its own.
func (c *Cut) Inherits(ev engine.Event) bool {
	p := c.classify(ev)
	switch {
	case p.terminal:
		return false
	case c.stage == "eval" && p.eval:
		made, ok := c.made[p.version]
		return ok && (made.before(c.evalFrom) || p.evalStep == 0)
	case c.stage == "eval":
		return true
	case p.eval:
		made, ok := c.made[p.version]
		return ok && made.before(c.at)
	}
	return p.before(c.at)
}

// Replays reports whether the branch's stage re-runs ev, an event the cut
// has classified (Inherits).
func (c *Cut) Replays(ev engine.Event) bool {
	p, ok := c.pos[ev.ID]
	if !ok || p.terminal || ev.Type != branchStages[c.stage].input {
		return false
	}
	if c.stage == "eval" {
		made, ok := c.made[p.version]
		return ok && !made.before(c.evalFrom)
	}
	return !p.eval && p.iter == c.at.iter && p.step == c.at.step-1
}

// classify places ev and remembers where.
func (c *Cut) classify(ev engine.Event) position {
	if p, ok := c.pos[ev.ID]; ok {
		return p
	}
	p := c.place(ev)
	c.pos[ev.ID] = p
	return p
}

func (c *Cut) place(ev engine.Event) position {
	pre := func(step int) position { return position{iter: -1, step: step} }
	attempt := func(purpose string, iteration int, version int64, step int) position {
		switch purpose {
		case schemas.PurposeTrain:
			return position{iter: iteration, step: step}
		case schemas.PurposeEval:
			return position{eval: true, version: version, evalStep: step + 1}
		}
		return pre(6 + step) // a demonstration
	}
	switch ev.Type {
	case schemas.RunStarted:
		return pre(0)
	case schemas.SynthRequested:
		return pre(1)
	case schemas.SynthCandidate:
		return pre(2)
	case schemas.TaskSynthesized, schemas.SynthDiscarded:
		return pre(3)
	case schemas.TaskAudited:
		return pre(4)
	case schemas.PoolSealed:
		c.made[0] = pre(5)
		return pre(5)
	case schemas.SFTRequested:
		return pre(9)
	case schemas.SFTCompleted:
		var p schemas.SFTCompletedPayload
		if ev.Decode(&p) == nil {
			c.made[p.PolicyVersion] = pre(10)
		}
		return pre(10)
	case schemas.IterationStarted:
		var p schemas.IterationStartedPayload
		if ev.Decode(&p) == nil {
			return position{iter: p.Iteration}
		}
	case schemas.RolloutRequested:
		var p schemas.RolloutRequestedPayload
		if ev.Decode(&p) == nil {
			return attempt(p.Purpose, p.Iteration, p.PolicyVersion, 0)
		}
	case schemas.RolloutCompleted:
		var p schemas.RolloutCompletedPayload
		if ev.Decode(&p) == nil {
			return attempt(p.Purpose, p.Iteration, p.PolicyVersion, 1)
		}
	case schemas.RewardScored:
		var p schemas.RewardScoredPayload
		if ev.Decode(&p) == nil {
			return attempt(p.Purpose, p.Iteration, p.PolicyVersion, 2)
		}
	case schemas.BatchReady:
		var p schemas.BatchReadyPayload
		if ev.Decode(&p) == nil {
			return position{iter: p.Iteration, step: 3}
		}
	case schemas.CriticUpdated:
		var p schemas.CriticUpdatedPayload
		if ev.Decode(&p) == nil {
			return position{iter: p.Iteration, step: 4}
		}
	case schemas.PolicyUpdated:
		var p schemas.PolicyUpdatedPayload
		if ev.Decode(&p) == nil {
			c.made[p.PolicyVersion] = position{iter: p.Iteration, step: 5}
			return position{iter: p.Iteration, step: 5}
		}
	case schemas.EvalRequested:
		var p schemas.EvalRequestedPayload
		if ev.Decode(&p) == nil {
			return position{eval: true, version: p.PolicyVersion}
		}
	case schemas.EvalCompleted:
		var p schemas.EvalCompletedPayload
		if ev.Decode(&p) == nil {
			return position{eval: true, version: p.PolicyVersion, evalStep: 4}
		}
	default:
		var f engine.Failure
		if strings.HasSuffix(ev.Type, ".failed") && ev.Decode(&f) == nil {
			if failed, ok := c.pos[f.EventID]; ok && !failed.terminal {
				if failed.eval {
					failed.evalStep++
				} else {
					failed.step++
				}
				return failed
			}
		}
	}
	return position{terminal: true}
}

// Started reads run's run.started; ok is false when it has none.
func Started(ctx context.Context, log *engine.Log, run string) (p schemas.RunStartedPayload, ok bool, err error) {
	ev, ok, err := log.StartEvent(ctx, run)
	if err != nil || !ok {
		return p, false, err
	}
	if err := ev.Decode(&p); err != nil {
		return p, false, fmt.Errorf("run %s: %w", run, err)
	}
	return p, true, nil
}

// History calls fn with run's events of the given types (every type when
// types is empty), in log order, as control folds them: for a continued
// branch, first the events of its parent's history that it takes over
// (Cut.Inherits), then its own. Other runs read their own events only.
func History(ctx context.Context, log *engine.Log, run string, types []string, fn func(engine.Event) error) error {
	return walk(ctx, log, run, types, fn, 0)
}

func walk(ctx context.Context, log *engine.Log, run string, types []string, fn func(engine.Event) error, depth int) error {
	started, ok, err := Started(ctx, log, run)
	if err != nil {
		return err
	}
	if ok && started.Parent != "" && started.Branch != nil && started.Branch.Continue {
		if depth >= 32 {
			return engine.Permanent(fmt.Errorf("run %s: lineage deeper than 32 runs", run))
		}
		cut, err := NewCut(*started.Branch)
		if err != nil {
			return engine.Permanent(fmt.Errorf("run %s: %w", run, err))
		}
		wanted := typeSet(types)
		// The cut sees every event of the parent, so failures find what failed.
		err = walk(ctx, log, started.Parent, nil, func(ev engine.Event) error {
			if cut.Inherits(ev) && (wanted == nil || wanted[ev.Type]) {
				return fn(ev)
			}
			return nil
		}, depth+1)
		if err != nil {
			return err
		}
	}
	return log.ReplayRun(ctx, run, types, fn)
}

func typeSet(types []string) map[string]bool {
	if len(types) == 0 {
		return nil
	}
	m := map[string]bool{}
	for _, t := range types {
		m[t] = true
	}
	return m
}
