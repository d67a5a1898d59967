package pipeline

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/lineage"
	"github.com/t1pipe/t1/schemas"
)

// BranchOptions say how to branch a run (t1 replay).
type BranchOptions struct {
	// Stage re-runs over Parent's inputs into the new run Into.
	Stage, Parent, Into string
	// From bounds a replay without Continue to the inputs from a stream
	// sequence or a time on (zero: every input of the parent).
	From engine.ReplayFrom
	// Continue re-runs Stage on its inputs at Iteration only, and lets the
	// branch's downstream stages run on as in a run of its own.
	Continue  bool
	Iteration int
	// Set overrides frozen settings of the parent: reward_scale, seed,
	// iterations (OverridableSettings).
	Set map[string]string
}

// OverridableSettings are the settings a branch may change from its
// parent's. The model's shape and the pool stay the parent's: a branch
// trains the parent's checkpoints on the parent's tasks.
func OverridableSettings() []string { return []string{"iterations", "reward_scale", "seed"} }

// Branch opens the run o.Into as a branch of o.Parent and re-runs o.Stage
// over the parent's inputs into it. The branch's run.started names its
// parent and branch point and freezes the parent's settings — seed,
// model shape, iterations, reward scale, pool — but for the overrides in
// o.Set, which it records beside the parent's values. The stage reads
// what its inputs point at (the parent's objects) and writes under the
// branch's keys; the parent's events and objects are never written to.
//
// With o.Continue the branch is the parent's run up to the branch point
// and a run of its own after it (lineage.Cut): the stage re-runs its
// inputs at o.Iteration, and the branch's control decides what follows
// from the branch's events once its stages run (Stages, on the same log).
// Branching again into the same run with the same options resumes it;
// other options for an existing run are refused.
func (p *Pipeline) Branch(ctx context.Context, log *engine.Log, o BranchOptions) (engine.BranchResult, error) {
	var none engine.BranchResult
	st, err := p.Stage(o.Stage)
	if err != nil {
		return none, err
	}
	if err := keys.ValidRun(o.Into); err != nil {
		return none, err
	}
	if o.Into == o.Parent {
		return none, fmt.Errorf("branch: --into must name a new run, not %s itself", o.Parent)
	}
	if o.Continue {
		if !slices.Contains(lineage.ContinuableStages(), o.Stage) {
			return none, fmt.Errorf("branch: --continue goes on from one of %v, not %s", lineage.ContinuableStages(), o.Stage)
		}
		if o.From != (engine.ReplayFrom{}) {
			return none, fmt.Errorf("branch: --continue branches at an iteration (--iteration); --from-seq and --since bound a replay without it")
		}
		if o.Iteration < 0 {
			return none, fmt.Errorf("branch: --iteration %d: want 0 or more", o.Iteration)
		}
		if o.Stage == "sft" && o.Iteration != 0 {
			return none, fmt.Errorf("branch: sft runs before the first iteration; leave --iteration out")
		}
	} else if o.Iteration != 0 {
		return none, fmt.Errorf("branch: --iteration picks where a --continue branch starts; without --continue, bound the replay with --from-seq or --since")
	}
	parent, ok, err := lineage.Started(ctx, log, o.Parent)
	if err != nil {
		return none, err
	}
	if !ok {
		return none, fmt.Errorf("branch: run %s has no run.started (t1 runs lists the runs): a branch starts from a run that was started", o.Parent)
	}
	if parent.Model != p.started.Model {
		return none, fmt.Errorf("branch: the configuration's model (%+v) is not run %s's (%+v): a branch trains its parent's checkpoints; use the parent's model settings", p.started.Model, o.Parent, parent.Model)
	}
	started, err := p.branchStarted(ctx, log, parent, o)
	if err != nil {
		return none, err
	}
	if o.Continue && o.Iteration >= started.Iterations {
		return none, fmt.Errorf("branch: iteration %d: run %s has iterations 0 to %d", o.Iteration, o.Parent, started.Iterations-1)
	}
	if err := openBranch(ctx, log, o.Into, started); err != nil {
		return none, err
	}
	hash := "replay:" + p.hash
	if !o.Continue {
		return log.Branch(ctx, st, o.Parent, o.Into, o.From, hash, nil)
	}
	cut, err := lineage.NewCut(*started.Branch)
	if err != nil {
		return none, err
	}
	var inputs []engine.Event
	err = lineage.History(ctx, log, o.Parent, nil, func(ev engine.Event) error {
		if cut.Inherits(ev) && cut.Replays(ev) {
			inputs = append(inputs, ev)
		}
		return nil
	})
	if err != nil {
		return none, err
	}
	if len(inputs) == 0 {
		return none, fmt.Errorf("branch: run %s has no input of %s at iteration %d to re-run (t1 events list --run %s)", o.Parent, o.Stage, o.Iteration, o.Parent)
	}
	return log.BranchEvents(ctx, st, inputs, o.Into, hash)
}

// branchStarted is the branch's run.started: the parent's frozen
// settings with o's overrides.
func (p *Pipeline) branchStarted(ctx context.Context, log *engine.Log, parent schemas.RunStartedPayload, o BranchOptions) (schemas.RunStartedPayload, error) {
	b := &schemas.BranchPoint{Stage: o.Stage, FromSeq: o.From.Seq, Continue: o.Continue}
	if o.Continue {
		b.Iteration = o.Iteration
	}
	err := lineage.History(ctx, log, o.Parent, []string{schemas.PoolSealed}, func(ev engine.Event) error {
		var sealed schemas.PoolSealedPayload
		if err := ev.Decode(&sealed); err != nil {
			return err
		}
		b.PoolVersion = max(b.PoolVersion, sealed.PoolVersion)
		return nil
	})
	if err != nil {
		return schemas.RunStartedPayload{}, err
	}
	s := schemas.RunStartedPayload{Seed: parent.Seed, ConfigHash: p.hash, Model: parent.Model, Iterations: parent.Iterations,
		RewardScale: parent.RewardScale, EvalSuites: p.started.EvalSuites, Parent: o.Parent, Branch: b}
	names := make([]string, 0, len(o.Set))
	for k := range o.Set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := strings.TrimSpace(o.Set[k])
		var was string
		switch k {
		case "reward_scale":
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x <= 0 || math.IsInf(x, 0) || math.IsNaN(x) {
				return s, fmt.Errorf("--set reward_scale=%s: want a number above 0", v)
			}
			was, s.RewardScale = strconv.FormatFloat(s.RewardScale, 'g', -1, 64), x
		case "seed":
			x, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return s, fmt.Errorf("--set seed=%s: want a whole number of 0 or more", v)
			}
			was, s.Seed = strconv.FormatUint(s.Seed, 10), x
		case "iterations":
			x, err := strconv.Atoi(v)
			if err != nil || x < 1 || x <= b.Iteration {
				return s, fmt.Errorf("--set iterations=%s: want a whole number above the branch's iteration %d", v, b.Iteration)
			}
			was, s.Iterations = strconv.Itoa(s.Iterations), x
		case "pool_version", "model", "model.vocab", "model.layers", "model.top_k", "model.experts":
			return s, fmt.Errorf("--set %s: frozen for a branch, which trains its parent's checkpoints on its parent's pool; start a new run instead", k)
		default:
			return s, fmt.Errorf("--set %s: unknown setting; a branch may change %v", k, OverridableSettings())
		}
		b.Overrides = append(b.Overrides, schemas.Override{Key: k, Value: v, Parent: was})
	}
	return s, nil
}

// openBranch publishes into's run.started, or finds the same one there.
func openBranch(ctx context.Context, log *engine.Log, into string, started schemas.RunStartedPayload) error {
	ev, ok, err := log.StartEvent(ctx, into)
	if err != nil {
		return err
	}
	if ok {
		var have schemas.RunStartedPayload
		if err := ev.Decode(&have); err != nil {
			return err
		}
		if have.Parent != started.Parent || have.Branch == nil || !sameBranch(*have.Branch, *started.Branch) {
			return fmt.Errorf("branch: run %s exists already (parent %q); pick another --into", into, have.Parent)
		}
		return nil
	}
	counts, err := log.EventCounts(ctx, into)
	if err != nil {
		return err
	}
	if counts.Total() > 0 {
		return fmt.Errorf("branch: run %s has events already; pick another --into", into)
	}
	root, err := engine.NewRootEvent(into, schemas.RunStarted, "branch", started)
	if err != nil {
		return err
	}
	_, err = log.Publish(ctx, root)
	return err
}

func sameBranch(a, b schemas.BranchPoint) bool {
	return a.Stage == b.Stage && a.Iteration == b.Iteration && a.FromSeq == b.FromSeq && a.Continue == b.Continue &&
		slices.Equal(a.Overrides, b.Overrides)
}

// variantStages maps a configuration key (dotted, as variants set them)
// or a key prefix ending in "." to the first stage of an iteration that
// reads it. Keys not here may change what comes before the first
// iteration — the pool, the model, the demonstrations — or the number of
// iterations, so a variant that sets one needs a run of its own.
var variantStages = map[string]string{
	// Only training attempts sample at train_temperature, and the control
	// settings below choose the tasks of iterations after the first.
	"stages.rollout.train_temperature": "rollout",
	"stages.control.skip_uniform":      "rollout", "stages.control.fresh_tasks": "rollout",
	"stages.reward.": "reward",
	// The critic stage warms the critic up and computes the advantages
	// the actor update trains on.
	"training.gamma": "critic", "training.lambda": "critic", "training.baseline": "critic",
	"training.value_clip": "critic", "training.critic_lr": "critic", "training.critic_epochs": "critic",
	"training.critic_init": "critic", "training.warmup.": "critic", "training.warmup": "critic",
	"training.lr": "ppo", "training.clip": "ppo", "training.epochs": "ppo", "training.minibatches": "ppo",
	"training.normalize_advantages": "ppo", "training.loss_weighting": "ppo", "training.replay": "ppo",
	"training.max_live_kl": "ppo",
	// Fine-tuning runs before the first iteration, on demonstrations that
	// do not depend on it; the gradient clip also bounds critic and actor.
	"training.sft_lr": "sft", "training.sft_batch": "sft", "training.sft_schedule": "sft", "training.sft_weight_decay": "sft", "training.max_grad_norm": "sft",
}

// VariantBranch is the stage a variant setting keys (config.Variant's
// dotted paths) first changes: a run of the variant is the base run up to
// that stage's outputs at iteration 0 and differs after them, so it can be
// made as a continued branch of the base run at that stage (Branch with
// Continue) instead of repeating synthesis, audit, fine-tuning and the
// evaluations the two share. ok is false when some key may change what
// comes before: the variant then needs a run of its own.
func VariantBranch(keys []string) (stage string, ok bool) {
	order := []string{"sft", "rollout", "reward", "critic", "ppo"}
	first := len(order)
	for _, k := range keys {
		s, found := variantStages[k]
		if !found {
			for prefix, ps := range variantStages {
				if strings.HasSuffix(prefix, ".") && strings.HasPrefix(k, prefix) {
					s, found = ps, true
				}
			}
		}
		if !found {
			return "", false
		}
		first = min(first, slices.Index(order, s))
	}
	if first == len(order) {
		return "", false
	}
	return order[first], true
}
