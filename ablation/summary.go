package ablation

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/t1pipe/t1/execute"
	"github.com/t1pipe/t1/report"
)

// Summary is how an ablation ended, as `t1 ablate` prints it.
type Summary struct {
	Base     string             `json:"base"`
	Runs     []*execute.Summary `json:"runs"`
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
	Spread []Spread `json:"spread,omitempty"`
	// Gains is, with several seeds, each variant's step from one stage of
	// the recipe to the next, taken within each seed and then over the
	// seeds: the seeds' policies differ more from each other than one
	// stage's step, so the step is judged seed by seed.
	Gains []Gain `json:"gains,omitempty"`
	// results are the eval_results of every run of the ablation, by run,
	// which Gains pairs attempt by attempt.
	results map[string][]report.EvalResult
}

// Gain is one variant's step between two stages of the recipe over the
// seeds that evaluated both: mean, lowest and highest of the per-seed
// differences in resolve rate, next to the spread between the seeds at
// the earlier stage (highest − lowest resolve rate there), and the
// attempts the step changed, paired over every seed (report.Paired).
type Gain struct {
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

// Spread is one variant's stage of the recipe over the seeds.
type Spread struct {
	Variant       string  `json:"variant"` // "" for the base configuration
	Stage         string  `json:"stage"`
	Seeds         int     `json:"seeds"`
	ResolveMean   float64 `json:"resolve_mean"`
	ResolveMin    float64 `json:"resolve_min"`
	ResolveMax    float64 `json:"resolve_max"`
	PartialCredit float64 `json:"partial_credit_mean"`
}

// WriteText prints s as `t1 ablate` ends.
func (s *Summary) WriteText(w io.Writer) {
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
func groupHeader(s *Summary) string {
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
