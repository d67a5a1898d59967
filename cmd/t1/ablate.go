package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/store"
)

type ablationSummary struct {
	Base     string             `json:"base"`
	Runs     []*pipelineSummary `json:"runs"`
	Report   string             `json:"report"`
	HTML     string             `json:"report_html"`
	Stopped  bool               `json:"stopped,omitempty"`
	Variants []string           `json:"variants"`
	// RLSeeds, when set, are the seeds RL ran at from each base run's one
	// fine-tuned policy: Spread and Gains have a row per base run (its id
	// in Variant) over its RL seeds, RL's spread alone.
	RLSeeds []uint `json:"rl_seeds,omitempty"`
	// PoolSeed, when set, is the one seed every run's pool was drawn from
	// (stages.control.pool_seed): the spread over seeds is then training's
	// alone, not the pool's.
	PoolSeed uint64 `json:"pool_seed,omitempty"`
	// ModelSeed, when set, is the one initial model every seed started
	// from (--model-seed): the seeds then differ in what training draws.
	ModelSeed uint64 `json:"model_seed,omitempty"`
	// Spread is, with several seeds, each variant's recipe table over the
	// seeds: mean, lowest and highest resolve rate per stage.
	Spread []spreadRow `json:"spread,omitempty"`
	// Gains is, with several seeds, each variant's step from one stage of
	// the recipe to the next, taken within each seed and then over the
	// seeds: the seeds' policies differ more from each other than one
	// stage's step, so the step is judged seed by seed.
	Gains []gainRow `json:"gains,omitempty"`
	// results are the eval_results of every run of the ablation, by run,
	// which Gains pairs attempt by attempt.
	results map[string][]report.EvalResult
}

// gainRow is one variant's step between two stages of the recipe over the
// seeds that evaluated both: mean, lowest and highest of the per-seed
// differences in resolve rate, next to the spread between the seeds at
// the earlier stage (highest − lowest resolve rate there), and the
// attempts the step changed, paired over every seed (report.Paired).
type gainRow struct {
	Variant string        `json:"variant"`
	From    string        `json:"from"`
	To      string        `json:"to"`
	Seeds   int           `json:"seeds"`
	Mean    float64       `json:"gain_mean"`
	Min     float64       `json:"gain_min"`
	Max     float64       `json:"gain_max"`
	Spread  float64       `json:"from_spread"`
	Paired  report.Paired `json:"paired"`
	SignP   float64       `json:"sign_test_p"`
}

// spreadRow is one variant's stage of the recipe over the seeds.
type spreadRow struct {
	Variant       string  `json:"variant"` // "" for the base configuration
	Stage         string  `json:"stage"`
	Seeds         int     `json:"seeds"`
	ResolveMean   float64 `json:"resolve_mean"`
	ResolveMin    float64 `json:"resolve_min"`
	ResolveMax    float64 `json:"resolve_max"`
	PartialCredit float64 `json:"partial_credit_mean"`
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

// spread folds the recipe rows of runs (variant name → one summary per
// seed) into spreadRows, in the order of names.
func spread(names []string, runs map[string][]*pipelineSummary) []spreadRow {
	var out []spreadRow
	for _, n := range names {
		for _, stage := range []string{report.StageBase, report.StageSFT, report.StageRL} {
			row := spreadRow{Variant: n, Stage: stage, ResolveMin: 1}
			for _, s := range runs[n] {
				for _, r := range s.Recipe {
					if r.Stage != stage {
						continue
					}
					row.Seeds++
					row.ResolveMean += r.ResolveRate
					row.PartialCredit += r.MeanReward
					row.ResolveMin, row.ResolveMax = min(row.ResolveMin, r.ResolveRate), max(row.ResolveMax, r.ResolveRate)
				}
			}
			if row.Seeds > 0 {
				row.ResolveMean /= float64(row.Seeds)
				row.PartialCredit /= float64(row.Seeds)
				out = append(out, row)
			}
		}
	}
	return out
}

// gains returns, for each variant of names, the steps base → SFT and
// SFT → RL of its runs' recipes, each seed's step taken within the seed
// and, where results holds both evaluations (a branch's earlier one is
// its ancestor's), attempt by attempt.
func gains(names []string, runs map[string][]*pipelineSummary, results map[string][]report.EvalResult) []gainRow {
	var out []gainRow
	steps := [][2]string{{report.StageBase, report.StageSFT}, {report.StageSFT, report.StageRL}}
	for _, n := range names {
		for _, st := range steps {
			row := gainRow{Variant: n, From: st[0], To: st[1], Min: math.Inf(1), Max: math.Inf(-1)}
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, s := range runs[n] {
				from, okF := recipeEval(s.Recipe, st[0])
				to, okT := recipeEval(s.Recipe, st[1])
				if !okF || !okT {
					continue
				}
				d := to.ResolveRate - from.ResolveRate
				row.Paired = row.Paired.Add(report.Pair(from.Suite, results[cmp.Or(from.From, s.Run)], from.PolicyVersion,
					results[cmp.Or(to.From, s.Run)], to.PolicyVersion))
				row.Seeds++
				row.Mean += d
				row.Min, row.Max = min(row.Min, d), max(row.Max, d)
				lo, hi = min(lo, from.ResolveRate), max(hi, from.ResolveRate)
			}
			if row.Seeds > 0 {
				row.Mean /= float64(row.Seeds)
				row.Spread = hi - lo
				row.SignP = row.Paired.SignP()
				out = append(out, row)
			}
		}
	}
	return out
}

// recipeEval is stage's evaluation in rows; with several suites, the
// first suite's.
func recipeEval(rows []report.RecipeRow, stage string) (report.Eval, bool) {
	for _, r := range rows {
		if r.Stage == stage {
			return r.Eval, true
		}
	}
	return report.Eval{}, false
}

func ablateCmd(g *globals) *cobra.Command {
	var only []string
	var baseOnly, fresh bool
	var seeds, rlSeeds []uint
	var jobs int
	var modelSeed uint64
	cmd := &cobra.Command{
		Use:   "ablate [--variants a,b] [--seeds 1,2,3 [--model-seed N] [--base-only] | --rl-seeds 1,2,3] [--jobs N] [--fresh]",
		Short: "Run the base run and its ablation variants on one seed and compare them in one report",
		Long: `Runs the configured run and then each variant of the configuration's variants list (by
default replay-off, critic-cold, reward-fraction and reward-binary) as run <run.id>-<name>, in
this process on the same infrastructure and seed, and writes a report that
shows them side by side: runs/<run.id>/ablation.md and ablation.html, in the store and under
the data directory. A variant whose settings change only what happens from an iteration on
(reward, critic, advantages, the actor update; pipeline.VariantBranch) runs as a continued branch
of the base run at the first stage it changes (t1 replay --continue at iteration 0): it shares the
base run's pool, fine-tuning and base and fine-tuned evaluations, which are the same by
construction, and re-runs only what differs. --fresh runs every variant from scratch instead.
Runs that already completed are not run again, so an interrupted ablation resumes where it
stopped. With --seeds, the base run and every variant run once per seed, as
run <run.id>-s<seed> (and <run.id>-s<seed>-<name>), each with that run seed and model seed on the
same held-out suite; the summary then shows each variant's base → SFT → RL resolve rate as the
mean and the lowest and highest over the seeds, and each step's gain within each seed beside the
attempts it changed: the held-out attempts (the same task, attempt index and sampling seed) solved
only after the step and only before it, over every seed, with the exact sign test's p-value for
that split. --base-only runs no variant: the base run's
spread over the seeds alone. --model-seed N starts every seed from the initial model of model seed N instead
of its own, as every seed of a post-training run starts from one pretrained checkpoint; with
stages.control.pool_seed and stages.control.sft_shuffle the seeds then differ only in what
training draws: the fine-tuning's order, the iterations' tasks and every sample. --rl-seeds instead runs RL again at each seed from each base run's
one fine-tuned policy, as run <base run>-rl<seed> (a continued branch at sft with that run seed;
the base run is its own seed's): its pool, fine-tuning and base and fine-tuned evaluations are the
base run's, so the spread shown per base run is RL's alone, the one an RL paper reports over its
seeds. With --seeds too, every seed's base run gets its RL seeds. The
runs run at once (--jobs): first every base run, then every branch, each run with consumers of
its own (<stage>_<run>), since most of a run's time is spent waiting on sandboxes and one run
keeps about half of two cores busy.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			names := only
			if len(names) == 0 && !baseOnly {
				names = cfg.VariantNames()
			}
			if baseOnly && len(only) > 0 {
				return errors.New("--base-only runs no variant: drop --variants")
			}
			if modelSeed > 0 && len(seeds) == 0 {
				return errors.New("--model-seed starts every seed from one initial model: name the seeds with --seeds")
			}
			if baseOnly && len(seeds) == 0 {
				return errors.New("--base-only compares the base run over seeds: name them with --seeds")
			}
			if len(rlSeeds) > 0 {
				if len(only) > 0 {
					return errors.New("--rl-seeds trains each base run's one fine-tuned policy once per seed, with no variant: drop --variants")
				}
				names = nil
			}
			if len(names) == 0 && !baseOnly && len(rlSeeds) == 0 {
				return fmt.Errorf("no variants configured (variants: in %s) and none named with --variants", configName(g))
			}
			bases := []config.Config{cfg}
			if len(seeds) > 0 {
				bases = bases[:0]
				for _, s := range seeds {
					bases = append(bases, seeded(cfg, uint64(s), modelSeed))
				}
			}
			var plan []ablationRun
			variantOf := map[string]string{}
			for _, b := range bases {
				plan = append(plan, ablationRun{Config: b})
				variantOf[b.Run.ID] = ""
				for _, n := range names {
					v, err := b.Variant(n)
					if err != nil {
						return err
					}
					r := ablationRun{Config: v}
					if !fresh {
						r.Parent = b.Run.ID
						r.Stage, r.Branch = branchStage(cfg, n)
					}
					plan = append(plan, r)
					variantOf[v.Run.ID] = n
				}
			}
			// With --rl-seeds, each base run and its RL seeds form a group
			// of their own: one fine-tuned policy, RL's spread.
			groups := append([]string{""}, names...)
			if len(rlSeeds) > 0 {
				groups = groups[:0]
				for _, b := range bases {
					groups = append(groups, b.Run.ID)
					variantOf[b.Run.ID] = b.Run.ID
					for _, k := range rlSeeds {
						if uint64(k) != b.Run.Seed {
							r := rlSeedBranch(b, uint64(k))
							plan = append(plan, r)
							variantOf[r.Config.Run.ID] = b.Run.ID
						}
					}
				}
			}
			ctx := cmd.Context()
			in, err := connect(ctx, cfg, local.Options{Serve: true})
			if err != nil {
				return err
			}
			defer in.Close()
			if jobs <= 0 {
				jobs = min(max(len(bases), len(rlSeeds)), 4)
			}
			sum, err := ablate(ctx, cmd.ErrOrStderr(), in, plan, jobs)
			if err != nil {
				return err
			}
			sum.Variants = names
			if sum.Stopped {
				return errStopped
			}
			if len(rlSeeds) > 0 {
				sum.RLSeeds = rlSeeds
			}
			if len(seeds) > 0 {
				sum.PoolSeed = cfg.Stages.Control.PoolSeed
				sum.ModelSeed = modelSeed
			}
			if len(seeds) > 0 || len(rlSeeds) > 0 {
				byVariant := map[string][]*pipelineSummary{}
				for _, r := range sum.Runs {
					byVariant[variantOf[r.Run]] = append(byVariant[variantOf[r.Run]], r)
				}
				sum.Spread = spread(groups, byVariant)
				sum.Gains = gains(groups, byVariant, sum.results)
			}
			if g.json {
				return printJSON(cmd, sum)
			}
			printAblation(cmd.OutOrStdout(), sum)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&only, "variants", nil, "variants to run, by name (default: every configured variant)")
	cmd.Flags().BoolVar(&fresh, "fresh", false, "run every variant from scratch, as a run of its own, instead of as a branch of its base run")
	cmd.Flags().BoolVar(&baseOnly, "base-only", false, "with --seeds, run only the base configuration, for its spread over the seeds")
	cmd.Flags().IntVar(&jobs, "jobs", 0, "with --seeds or --rl-seeds, run this many runs at once (default: every seed, at most 4)")
	cmd.Flags().UintSliceVar(&rlSeeds, "rl-seeds", nil, "train each base run's fine-tuned policy again once per seed (a base run is its own seed's), and show RL's spread over them")
	cmd.Flags().Uint64Var(&modelSeed, "model-seed", 0, "with --seeds, start every seed from the initial model of this model seed instead of its own")
	cmd.Flags().UintSliceVar(&seeds, "seeds", nil, "run the base and every variant once per seed, and show the spread (default: the configuration's seed only)")
	return cmd
}

// ablationRun is one run of an ablation: a run of its own, or (Branch) a
// continued branch of the base run Parent at Stage, iteration 0.
type ablationRun struct {
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
func rlSeedBranch(cfg config.Config, seed uint64) ablationRun {
	c := cfg
	c.Run.ID = fmt.Sprintf("%s-rl%d", cfg.Run.ID, seed)
	c.Run.Seed = seed
	return ablationRun{Config: c, Branch: true, Parent: cfg.Run.ID, Stage: "sft", Set: map[string]string{"seed": strconv.FormatUint(seed, 10)}}
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

// ablate runs each planned run to its end and writes the comparison
// report of all of them under the first one's run. The runs of their own
// go first, jobs at once, then the branches (each after its base run has
// completed), jobs at once. Every run's stages are its own (stagesOwn),
// so runs of different configurations in this process never handle each
// other's events.
func ablate(ctx context.Context, w io.Writer, in *local.Infra, plan []ablationRun, jobs int) (*ablationSummary, error) {
	sum := &ablationSummary{Base: plan[0].Config.Run.ID}
	out := make([]*pipelineSummary, len(plan))
	var mu sync.Mutex
	for _, branches := range []bool{false, true} {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(max(jobs, 1))
		for i, r := range plan {
			if r.Branch != branches {
				continue
			}
			g.Go(func() error {
				// Each line names the run it is about: runs at once
				// write to the same terminal.
				cw := w
				if jobs > 1 && len(plan) > 1 {
					cw = &prefixWriter{mu: &mu, w: w, prefix: r.Config.Run.ID + "  "}
				}
				s, err := ablateRun(gctx, cw, in, r)
				if err != nil || s == nil {
					return err
				}
				out[i] = s
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			// A run stopped: a branch would start from a base run that
			// has not ended.
			break
		}
	}
	for _, s := range out {
		if s == nil {
			fmt.Fprintf(w, "stopped; run `t1 ablate` again to resume\n")
			sum.Stopped = true
			return sum, nil
		}
		sum.Runs = append(sum.Runs, s)
	}
	runs := make([]*report.Run, len(plan))
	sum.results = map[string][]report.EvalResult{}
	for i, p := range plan {
		r, err := report.Load(ctx, in.Log, in.Store, p.Config.Run.ID)
		if err != nil {
			return nil, err
		}
		runs[i] = r
		sum.results[r.ID] = r.EvalResults
	}
	md, html, err := report.Render(runs)
	if err != nil {
		return nil, err
	}
	if sum.Report, err = writeRunFile(ctx, in, sum.Base, "", keys.Ablation(sum.Base), "text/markdown", md); err != nil {
		return nil, err
	}
	if sum.HTML, err = writeRunFile(ctx, in, sum.Base, "", keys.AblationHTML(sum.Base), "text/html; charset=utf-8", html); err != nil {
		return nil, err
	}
	return sum, nil
}

// ablateRun runs r to its end on in's servers; nil when ctx ends first.
func ablateRun(ctx context.Context, w io.Writer, in *local.Infra, r ablationRun) (*pipelineSummary, error) {
	c := r.Config
	// The servers, store and log are shared; only what the stages are
	// built from changes between runs.
	vin := *in
	vin.Config = c
	var s *pipelineSummary
	var err error
	ended := false
	if r.Branch {
		// A branch that ended is not branched again: that would re-run
		// its stage (a whole fine-tuning, for sft) to emit nothing new.
		if ended, err = runEnded(ctx, in.Log, c.Run.ID); err != nil {
			return nil, fmt.Errorf("run %s: %w", c.Run.ID, err)
		}
	}
	if r.Branch && !ended {
		fmt.Fprintf(w, "== run %s: a branch of %s at %s, iteration 0\n", c.Run.ID, r.Parent, r.Stage)
		var out replaySummary
		out, err = continueBranch(ctx, w, &vin, pipeline.BranchOptions{Stage: r.Stage, Parent: r.Parent, Into: c.Run.ID, Continue: true, Set: r.Set}, stagesOwn)
		s = out.Branch
	} else {
		fmt.Fprintf(w, "== run %s\n", c.Run.ID)
		s, err = executePipeline(ctx, w, &vin, stagesOwn, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", c.Run.ID, err)
	}
	if s != nil {
		// An ended run's own consumers have nothing left to deliver, and a
		// stream holds at most 1000: an ablation's nine per run would fill
		// it after a hundred runs. A later command that runs a stage of the
		// run makes its consumer again.
		if err := dropRunConsumers(ctx, in, c.Run.ID); err != nil {
			return nil, fmt.Errorf("run %s: %w", c.Run.ID, err)
		}
	}
	return s, nil
}

// dropRunConsumers deletes the consumers of run alone (<stage>_<run>).
func dropRunConsumers(ctx context.Context, in *local.Infra, run string) error {
	names := in.Log.Stream().ConsumerNames(ctx)
	var mine []string
	for n := range names.Name() {
		// A t1 eval job's consumer of another run can end in "_<run>"
		// too (jobDurable), after a second '_'.
		if stage, ok := strings.CutSuffix(n, "_"+run); ok && !strings.Contains(stage, "_") {
			mine = append(mine, n)
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("consumers: %w", err)
	}
	return dropConsumers(ctx, in.Log, mine)
}

// dropConsumers deletes the named consumers; one that is not there is
// no error.
func dropConsumers(ctx context.Context, l *engine.Log, names []string) error {
	for _, n := range names {
		if err := l.Stream().DeleteConsumer(ctx, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("delete consumer %s: %w", n, err)
		}
	}
	return nil
}

// prefixWriter starts every line written through it with prefix, one
// Write at a time across the writers sharing mu, so that the progress of
// runs at once stays readable line by line.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	mid    bool // the last Write ended inside a line
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	var buf bytes.Buffer
	for len(b) > 0 {
		if !p.mid {
			buf.WriteString(p.prefix)
		}
		line, rest, found := bytes.Cut(b, []byte("\n"))
		buf.Write(line)
		if found {
			buf.WriteByte('\n')
		}
		p.mid, b = !found, rest
	}
	if _, err := p.w.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return n, nil
}

// writeRunFile stores data at key, an object of run directly under
// runs/<run>/, and writes the same file as <dir>/<base of key>, dir
// defaulting to <data>/runs/<run>; it returns the file's path.
func writeRunFile(ctx context.Context, in *local.Infra, run, dir, key, contentType string, data []byte) (string, error) {
	if _, err := in.Store.Put(ctx, key, bytes.NewReader(data), int64(len(data)), store.PutOptions{ContentType: contentType}); err != nil {
		return "", fmt.Errorf("store %s: %w", key, err)
	}
	if dir == "" {
		dir = filepath.Join(in.DataDir, "runs", run)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	file := filepath.Join(dir, path.Base(key))
	return file, os.WriteFile(file, data, 0o644)
}

func printAblation(w io.Writer, s *ablationSummary) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tstatus\tpolicy\tevals (resolve / partial credit)\telapsed")
	for _, r := range s.Runs {
		var evals []string
		for _, e := range r.Evals {
			evals = append(evals, fmt.Sprintf("v%d %.2f/%.2f", e.PolicyVersion, e.ResolveRate, e.MeanReward))
		}
		fmt.Fprintf(tw, "%s\t%s\tv%d\t%s\t%s\n", r.Run, r.Status, r.PolicyLast, strings.Join(evals, "  "), r.Elapsed.Round(1e9))
	}
	tw.Flush()
	if len(s.RLSeeds) > 0 {
		fmt.Fprintf(w, "RL at seeds %s from each base run's one fine-tuned policy: the spread below is RL's alone\n", joinUints(s.RLSeeds))
	}
	if s.PoolSeed != 0 {
		fmt.Fprintf(w, "every seed's pool, split and demonstrations drawn from pool seed %d: the spread below is training's alone, not the pool's\n", s.PoolSeed)
	}
	if s.ModelSeed != 0 {
		fmt.Fprintf(w, "every seed started from the initial model of model seed %d: the spread below is not the initial weights'\n", s.ModelSeed)
	}
	if len(s.Spread) > 0 {
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "%s\tpolicy\tseeds\tresolve rate: mean [lowest, highest]\tpartial credit: mean\n", groupHeader(s))
		for _, r := range s.Spread {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f [%.3f, %.3f]\t%.2f\n", cmp.Or(r.Variant, "base"), r.Stage, r.Seeds, r.ResolveMean, r.ResolveMin, r.ResolveMax, r.PartialCredit)
		}
		tw.Flush()
	}
	if len(s.Gains) > 0 {
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "%s\tstep\tseeds\tgain within each seed: mean [lowest, highest]\tspread between seeds before it\tattempts solved only after / only before\tsign test p\n", groupHeader(s))
		for _, r := range s.Gains {
			paired, p := "-", "-"
			if r.Paired.Pairs > 0 {
				paired, p = fmt.Sprintf("%d / %d of %d", r.Paired.Improved, r.Paired.Worsened, r.Paired.Pairs), fmt.Sprintf("%.2g", r.SignP)
			}
			fmt.Fprintf(tw, "%s\t%s → %s\t%d\t%+.3f [%+.3f, %+.3f]\t%.3f\t%s\t%s\n", cmp.Or(r.Variant, "base"), r.From, r.To, r.Seeds, r.Mean, r.Min, r.Max, r.Spread, paired, p)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "report %s\nhtml   %s\n", s.Report, s.HTML)
}

// groupHeader names what a row of the spread and gains is about: a
// variant, or with RL seeds the base run whose fine-tuned policy they
// start from.
func groupHeader(s *ablationSummary) string {
	if len(s.RLSeeds) > 0 {
		return "fine-tuned policy of"
	}
	return "variant"
}

func joinUints(u []uint) string {
	s := make([]string, len(u))
	for i, v := range u {
		s[i] = strconv.FormatUint(uint64(v), 10)
	}
	return strings.Join(s, ", ")
}

func configName(g *globals) string {
	if g.configPath != "" {
		return g.configPath
	}
	return "the configuration"
}
