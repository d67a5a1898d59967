package ablation

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/pipeline"
)

// Options is what `t1 ablate` was asked to run.
type Options struct {
	// Variants names the variants to run (default: every configured one).
	Variants []string
	// BaseOnly runs no variant: the base run over Seeds alone.
	BaseOnly bool
	// Fresh runs every variant from scratch rather than as a branch.
	Fresh bool
	// Seeds runs the base and every variant once per seed.
	Seeds []uint
	// ModelSeed, with Seeds, starts every seed from this model seed's
	// initial model.
	ModelSeed uint64
	// RLSeeds trains each base run's fine-tuned policy again per seed.
	RLSeeds []uint
	// Jobs is how many runs run at once (0: every seed, at most 4).
	Jobs int
}

// Plan is every run of an ablation, in the order they are reported, and
// how their summaries group into the spread and gains.
type Plan struct {
	Runs []Run
	// Variants are the variants run, by name.
	Variants []string
	// groups are the rows of the spread and gains, in order: "" (the base
	// configuration) and each variant, or with RL seeds each base run.
	groups []string
	// groupOf is each run's group.
	groupOf map[string]string
	jobs    int
	options Options
	// poolSeed is the configuration's pool seed.
	poolSeed uint64
}

// NewPlan plans the ablation o asks of cfg; configName names where the
// configuration came from, for the error that finds no variant in it.
func NewPlan(cfg config.Config, o Options, configName string) (*Plan, error) {
	names := o.Variants
	if len(names) == 0 && !o.BaseOnly {
		names = cfg.VariantNames()
	}
	if o.BaseOnly && len(o.Variants) > 0 {
		return nil, errors.New("--base-only runs no variant: drop --variants")
	}
	if o.ModelSeed > 0 && len(o.Seeds) == 0 {
		return nil, errors.New("--model-seed starts every seed from one initial model: name the seeds with --seeds")
	}
	if o.BaseOnly && len(o.Seeds) == 0 {
		return nil, errors.New("--base-only compares the base run over seeds: name them with --seeds")
	}
	if len(o.RLSeeds) > 0 {
		if len(o.Variants) > 0 {
			return nil, errors.New("--rl-seeds trains each base run's one fine-tuned policy once per seed, with no variant: drop --variants")
		}
		names = nil
	}
	if len(names) == 0 && !o.BaseOnly && len(o.RLSeeds) == 0 {
		return nil, fmt.Errorf("no variants configured (variants: in %s) and none named with --variants", configName)
	}
	bases := []config.Config{cfg}
	if len(o.Seeds) > 0 {
		bases = bases[:0]
		for _, s := range o.Seeds {
			bases = append(bases, seeded(cfg, uint64(s), o.ModelSeed))
		}
	}
	p := &Plan{Variants: names, groupOf: map[string]string{}, options: o, poolSeed: cfg.Stages.Control.PoolSeed}
	for _, b := range bases {
		p.Runs = append(p.Runs, Run{Config: b})
		p.groupOf[b.Run.ID] = ""
		for _, n := range names {
			v, err := b.Variant(n)
			if err != nil {
				return nil, err
			}
			r := Run{Config: v}
			if !o.Fresh {
				r.Parent = b.Run.ID
				r.Stage, r.Branch = branchStage(cfg, n)
			}
			p.Runs = append(p.Runs, r)
			p.groupOf[v.Run.ID] = n
		}
	}
	// With RL seeds, each base run and its RL seeds form a group of their
	// own: one fine-tuned policy, RL's spread.
	p.groups = append([]string{""}, names...)
	if len(o.RLSeeds) > 0 {
		p.groups = p.groups[:0]
		for _, b := range bases {
			p.groups = append(p.groups, b.Run.ID)
			p.groupOf[b.Run.ID] = b.Run.ID
			for _, k := range o.RLSeeds {
				if uint64(k) != b.Run.Seed {
					r := rlSeedBranch(b, uint64(k))
					p.Runs = append(p.Runs, r)
					p.groupOf[r.Config.Run.ID] = b.Run.ID
				}
			}
		}
	}
	p.jobs = cmp.Or(max(o.Jobs, 0), min(max(len(bases), len(o.RLSeeds)), 4))
	return p, nil
}

// seeded returns cfg run at seed: its own run id (<id>-s<seed>), the
// run's seed and the fresh model's initialisation seed both set to it.
// With modelSeed above 0 the initial model is that seed's instead, so
// that every seed starts from one initial model as post-training runs
// start from one pretrained checkpoint, and the run id names it
// (<id>-m<modelSeed>-s<seed>): runs from other initial models are other
// runs. The held-out suite keeps its own seed, so every seed is measured
// on the same tasks.
func seeded(cfg config.Config, seed, modelSeed uint64) config.Config {
	c := cfg
	c.Run.ID = fmt.Sprintf("%s-s%d", cfg.Run.ID, seed)
	if modelSeed > 0 {
		c.Run.ID = fmt.Sprintf("%s-m%d-s%d", cfg.Run.ID, modelSeed, seed)
	}
	c.Run.Seed = seed
	c.Inference.Model.Seed = cmp.Or(modelSeed, seed)
	return c
}

// Run is one run of an ablation: a run of its own, or (Branch) a
// continued branch of the base run Parent at Stage, iteration 0.
type Run struct {
	Config config.Config
	Branch bool
	Parent string
	Stage  string
	// Set overrides the parent's frozen settings in the branch
	// (pipeline.BranchOptions.Set).
	Set map[string]string
}

// rlSeedBranch is RL run again at seed from cfg's run: a continued branch
// of it at sft, <run.id>-rl<seed>, with that run seed. The pool, the
// fine-tuning (deterministic from the parent's data and initial policy)
// and the base and fine-tuned evaluations (seeded per task and attempt)
// come out as the parent's; every iteration's tasks and sampling streams
// derive from the new seed, and so does everything trained on them.
func rlSeedBranch(cfg config.Config, seed uint64) Run {
	c := cfg
	c.Run.ID = fmt.Sprintf("%s-rl%d", cfg.Run.ID, seed)
	c.Run.Seed = seed
	return Run{Config: c, Branch: true, Parent: cfg.Run.ID, Stage: "sft", Set: map[string]string{"seed": strconv.FormatUint(seed, 10)}}
}

// branchStage is where variant n of cfg departs from the base run
// (pipeline.VariantBranch), and whether it can be made as a branch.
func branchStage(cfg config.Config, n string) (string, bool) {
	i := slices.IndexFunc(cfg.Variants, func(v config.Variant) bool { return v.Name == n })
	if i < 0 {
		return "", false
	}
	return pipeline.VariantBranch(slices.Sorted(maps.Keys(cfg.Variants[i].Set)))
}
