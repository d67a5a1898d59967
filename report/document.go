package report

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"

	"github.com/t1pipe/t1/schemas"
)

// document is a report independent of its format: Markdown shows its
// text and tables, HTML its figures too.
type document struct {
	title string
	// status is shown in bold, followed by the rest of the summary line.
	status, summary string
	sections        []*section
}

type section struct {
	id, title string
	blocks    []block
}

// block is one paragraph, table or figure.
type block struct {
	text   string
	table  *table
	figure *figure
}

type table struct {
	caption string
	head    []string
	rows    [][]string
}

// figure is one plot; panels holds its non-empty panels (none: no data).
type figure struct {
	id, title string
	panels    []*plot.Plot
}

func (s *section) para(format string, args ...any) {
	s.blocks = append(s.blocks, block{text: fmt.Sprintf(format, args...)})
}

func (s *section) add(t *table) {
	if len(t.rows) > 0 {
		s.blocks = append(s.blocks, block{table: t})
	}
}

// plot adds a figure of the panels that have data.
func (s *section) plot(id, title string, panels ...*plot.Plot) {
	f := &figure{id: id, title: title}
	for _, p := range panels {
		if p != nil {
			f.panels = append(f.panels, p)
		}
	}
	s.blocks = append(s.blocks, block{figure: f})
}

// labels names the metrics columns the report knows; others show by
// their column name.
var labels = map[string]string{
	ColRewardMean: "reward mean", ColResolveRate: "resolve rate", ColExplainedVariance: "explained variance",
	ColLogProbGap: "log-prob gap", ColClipFraction: "clip fraction", ColPolicyLoss: "policy loss", ColValueLoss: "value loss",
	ColRoutingFlips: "routing flip rate", ColApproxKL: "approx KL", ColGradNorm: "grad norm",
	ColLiveKL: "KL routing live", ColExpertsSwitched: "experts switched",
	ColRoutingMismatches: "routing mismatches", ColLossDrift: "loss drift", "trajectories": "attempts", "tokens": "tokens",
	ColStrictPrefix: "strict prefix", ColClippedNorm: "clipped normalisation", ColTextRetokened: "text retokenised",
	ColNewChunk: "new chunk", "logprob_gap_max": "max log-prob gap", "routing_sets": "routing sets", "actions": "loss tokens",
	"critic_warmup_steps": "critic warm-up steps",
	ColStaleness:          "staleness", ColBehaviourKL: "behaviour–proximal KL", ColTruncated: "weights truncated",
}

func label(col string) string {
	if l, ok := labels[col]; ok {
		return l
	}
	return col
}

// build lays out the report of runs[0], with runs[1:] as variants. The
// answer comes first (base → SFT → RL with intervals and paired tests),
// then the training curves, then the details, and the run's facts and
// event counts last: a reader opening the page sees the result without
// scrolling.
func build(runs []*Run) (*document, error) {
	r := runs[0]
	d := &document{title: "t1 run " + r.ID, status: r.Status, summary: summaryLine(r)}
	train, err := trainingSection(runs)
	if err != nil {
		return nil, err
	}
	d.sections = append(d.sections, answerSection(r), train)
	if len(runs) > 1 {
		v, err := variantsSection(runs)
		if err != nil {
			return nil, err
		}
		d.sections = append(d.sections, v)
	}
	evals, err := evalSection(r)
	if err != nil {
		return nil, err
	}
	repairs, err := repairsSection(r)
	if err != nil {
		return nil, err
	}
	pool, err := poolSection(r)
	if err != nil {
		return nil, err
	}
	d.sections = append(d.sections, evals, rewardsSection(r), attemptsSection(r), repairs, pool, runSection(r), eventsSection(r))
	return d, nil
}

// summaryLine follows the status word: the reason, latest policy, elapsed.
func summaryLine(r *Run) string {
	s := ""
	if r.Reason != "" {
		s += " (" + r.Reason + ")"
	}
	s += fmt.Sprintf(" · latest policy v%d", r.PolicyVersion)
	if !r.Ended.IsZero() {
		s += " · " + r.Ended.Sub(r.Started).Round(time.Second).String()
	}
	return s + "."
}

func runSection(r *Run) *section {
	s := &section{id: "run", title: "Run"}
	c := r.Config
	t := &table{head: []string{"fact", "value"}}
	row := func(k, v string) { t.rows = append(t.rows, []string{k, v}) }
	row("run", r.ID)
	row("status", r.Status)
	if r.Reason != "" {
		row("reason", r.Reason)
	}
	row("started", stamp(r.Started))
	if !r.Ended.IsZero() {
		row("ended", stamp(r.Ended))
		row("elapsed", r.Ended.Sub(r.Started).Round(time.Second).String())
	}
	if c.Parent != "" {
		row("branch of", branchOf(c))
	}
	row("seed", overridden(c, "seed", strconv.FormatUint(c.Seed, 10)))
	row("reward scale", overridden(c, "reward_scale", num(c.RewardScale)))
	row("iterations", overridden(c, "iterations", fmt.Sprintf("%d of %d", len(iterationsDone(r)), c.Iterations)))
	if c.Branch != nil && c.Branch.PoolVersion > 0 {
		row("pool", fmt.Sprintf("version %d of %s", c.Branch.PoolVersion, c.Parent))
	}
	if c.ConfigHash != "" {
		row("config hash", c.ConfigHash)
	}
	m := c.Model
	row("model", fmt.Sprintf("vocab %d, %d MoE layers, top-%d of %d experts", m.Vocab, m.Layers, m.TopK, m.Experts))
	if len(c.EvalSuites) > 0 {
		row("eval suites", strings.Join(c.EvalSuites, ", "))
	}
	row("latest policy", fmt.Sprintf("v%d", r.PolicyVersion))
	for _, f := range r.SFT {
		on := ""
		if f.Demonstrations > 0 {
			on = fmt.Sprintf(" on demonstrations of %d tasks", f.Demonstrations)
			if n := lastPoolTasks(r); n > 0 {
				on += fmt.Sprintf(" of the pool's %d", n)
			}
		}
		if f.Unsolved > 0 {
			on += fmt.Sprintf(" (%d left out: their replay failed the verifier)", f.Unsolved)
		}
		row("supervised fine-tuning", fmt.Sprintf("v%d%s, loss %s", f.PolicyVersion, on, num(f.Loss)))
	}
	row("failed events", strconv.FormatUint(r.Failed, 10))
	row("dead letters", strconv.FormatUint(r.DeadLetters, 10))
	if len(r.Metrics.Versions) > 0 {
		row("metrics schema", strings.Join(r.Metrics.Versions, ", "))
	}
	s.add(t)
	return s
}

// branchOf says where a branch left its parent and how it went on.
func branchOf(c Config) string {
	b := c.Branch
	if b == nil {
		return c.Parent
	}
	switch {
	case b.Continue && b.Stage == "sft":
		return fmt.Sprintf("%s, re-running sft, then on as a run of its own", c.Parent)
	case b.Continue:
		return fmt.Sprintf("%s at iteration %d, re-running %s, then on as a run of its own", c.Parent, b.Iteration, b.Stage)
	case b.FromSeq > 0:
		return fmt.Sprintf("%s, re-running %s from sequence %d (nothing after it)", c.Parent, b.Stage, b.FromSeq)
	}
	return fmt.Sprintf("%s, re-running %s (nothing after it)", c.Parent, b.Stage)
}

// overridden is a frozen setting's value, with its parent's beside it
// when the branch changed it.
func overridden(c Config, key, value string) string {
	if c.Branch == nil {
		return value
	}
	for _, o := range c.Branch.Overrides {
		if o.Key == key {
			return fmt.Sprintf("%s (set for the branch; %s: %s)", value, c.Parent, o.Parent)
		}
	}
	return value + " (as " + c.Parent + ")"
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

// iterationsDone lists the distinct iterations with a metrics row.
func iterationsDone(r *Run) []int {
	var its []int
	for _, it := range r.Metrics.Rows {
		if !slices.Contains(its, it.Iteration) {
			its = append(its, it.Iteration)
		}
	}
	return its
}

// eventsSection lists counts in pipeline order, then any other types.
func eventsSection(r *Run) *section {
	s := &section{id: "events", title: "Events"}
	t := &table{head: []string{"type", "count"}}
	seen := map[string]bool{}
	for _, typ := range schemas.EventTypes() {
		if n := r.Events[typ]; n > 0 {
			t.rows = append(t.rows, []string{typ, strconv.FormatUint(n, 10)})
		}
		seen[typ] = true
	}
	for _, typ := range slices.Sorted(maps.Keys(r.Events)) {
		if !seen[typ] {
			t.rows = append(t.rows, []string{typ, strconv.FormatUint(r.Events[typ], 10)})
		}
	}
	s.add(t)
	s.para("Failed events: %d; dead letters: %d.", r.Failed, r.DeadLetters)
	return s
}

// lastPoolTasks is the size of the run's latest sealed pool (0: none).
func lastPoolTasks(r *Run) int {
	if len(r.Pools) == 0 {
		return 0
	}
	return r.Pools[len(r.Pools)-1].Tasks
}

func poolSection(r *Run) (*section, error) {
	s := &section{id: "pool", title: "Training pool"}
	t := &table{head: []string{"version", "tasks", "excluded (near-duplicates)", "categories"}}
	for _, p := range r.Pools {
		var cs []string
		for _, c := range slices.Sorted(maps.Keys(p.Categories)) {
			cs = append(cs, fmt.Sprintf("%s %d", c, p.Categories[c]))
		}
		t.rows = append(t.rows, []string{strconv.Itoa(p.Version), strconv.Itoa(p.Tasks), strconv.Itoa(p.Excluded), strings.Join(cs, ", ")})
	}
	if len(r.Pools) == 0 {
		s.para("No pool sealed.")
	}
	s.add(t)
	var panel *plot.Plot
	if len(r.Pools) > 0 {
		p := r.Pools[len(r.Pools)-1]
		cats := slices.Sorted(maps.Keys(p.Categories))
		vals := make([]float64, len(cats))
		for i, c := range cats {
			vals[i] = float64(p.Categories[c])
		}
		var err error
		if panel, err = barPanel(fmt.Sprintf("Pool v%d by category", p.Version), "category", "tasks", cats, []group{{"tasks", vals}}, scaleData); err != nil {
			return nil, err
		}
		panel.Y.Tick.Marker = integerTicks
	}
	s.plot("pool-categories", "Sealed pool: tasks per category", panel)
	return s, nil
}

// series is one metrics column of a run over its iterations.
func series(r *Run, col, name string) line {
	l := line{name: name}
	for _, it := range r.Metrics.Rows {
		if v, ok := it.Values[col]; ok {
			l.add(float64(it.Iteration), v)
		}
	}
	return l
}

// replayLabel says whether a run's updates replayed routing.
func replayLabel(r *Run) string {
	on, off := 0, 0
	for _, it := range r.Metrics.Rows {
		switch {
		case it.Replay == nil:
		case *it.Replay:
			on++
		default:
			off++
		}
	}
	switch {
	case on > 0 && off > 0:
		return "replay mixed"
	case on > 0:
		return "replay on"
	case off > 0:
		return "replay off"
	}
	return "replay unknown"
}

func runName(r *Run, many bool) string {
	if many {
		return r.ID + " (" + replayLabel(r) + ")"
	}
	return r.ID
}

func trainingSection(runs []*Run) (*section, error) {
	r := runs[0]
	many := len(runs) > 1
	s := &section{id: "training", title: "Training"}
	for _, n := range signalNotes(r) {
		s.para("%s", n)
	}
	lines := func(col string) []line {
		var ls []line
		for _, x := range runs {
			ls = append(ls, series(x, col, runName(x, many)))
		}
		return ls
	}
	reward, err := linePanel("Reward mean", "iteration", "reward", lines(ColRewardMean), scaleData, false)
	if err != nil {
		return nil, err
	}
	resolve, err := linePanel("Resolve rate", "iteration", "resolve rate", lines(ColResolveRate), scaleRate, false)
	if err != nil {
		return nil, err
	}
	s.plot("reward", "Reward mean and resolve rate per iteration", reward, resolve)
	ev, err := linePanel("Explained variance", "iteration", "explained variance", lines(ColExplainedVariance), scaleData, true)
	if err != nil {
		return nil, err
	}
	s.plot("explained-variance", "Critic explained variance per iteration (dashed: 0; a warm critic stays above it)", ev)
	gap, err := linePanel("Train–sampling log-prob gap", "iteration", "masked weighted |Δ log-prob|", lines(ColLogProbGap), scaleData, false)
	if err != nil {
		return nil, err
	}
	if many {
		// Iterations side by side, a bar per run: replay on against off.
		var its []int
		for _, x := range runs {
			for _, it := range iterationsDone(x) {
				if !slices.Contains(its, it) {
					its = append(its, it)
				}
			}
		}
		slices.Sort(its)
		cats := make([]string, len(its))
		for i, it := range its {
			cats[i] = strconv.Itoa(it)
		}
		var groups []group
		for _, x := range runs {
			g := group{name: runName(x, true), values: make([]float64, len(its))}
			for i := range g.values {
				g.values[i] = math.NaN()
			}
			for _, row := range x.Metrics.Rows {
				if v, ok := row.Values[ColLogProbGap]; ok {
					g.values[slices.Index(its, row.Iteration)] = v
				}
			}
			groups = append(groups, g)
		}
		side, err := barPanel("Log-prob gap by run", "iteration", "masked weighted |Δ log-prob|", cats, groups, scaleData)
		if err != nil {
			return nil, err
		}
		s.plot("logprob-gap", "Train–sampling log-prob gap per iteration, each run (replay on or off) side by side", gap, side)
	} else {
		s.plot("logprob-gap", "Train–sampling log-prob gap per iteration ("+replayLabel(r)+")", gap)
	}
	cols := []string{}
	for _, c := range r.Metrics.Columns {
		if !slices.Contains(RepairColumns, c) {
			cols = append(cols, c)
		}
	}
	t := &table{head: []string{"iteration", "policy"}}
	for _, c := range cols {
		t.head = append(t.head, label(c))
	}
	t.head = append(t.head, "routing replay")
	for _, it := range r.Metrics.Rows {
		row := []string{strconv.Itoa(it.Iteration), fmt.Sprintf("v%d", it.PolicyVersion)}
		for _, c := range cols {
			row = append(row, cell(it, c))
		}
		rep := "unknown"
		if it.Replay != nil {
			rep = map[bool]string{true: "on", false: "off"}[*it.Replay]
		}
		t.rows = append(t.rows, append(row, rep))
	}
	if len(r.Metrics.Rows) == 0 {
		s.para("No metrics rows yet.")
	}
	s.add(t)
	return s, nil
}

func cell(it Iteration, col string) string {
	v, ok := it.Values[col]
	if !ok {
		return "–"
	}
	return num(v)
}

func repairsSection(r *Run) (*section, error) {
	s := &section{id: "drift", title: "Tokenisation drift repairs (TITO)"}
	var its []string
	var groups []group
	for _, c := range RepairColumns {
		groups = append(groups, group{name: label(c)})
	}
	t := &table{head: []string{"iteration"}}
	for _, c := range RepairColumns {
		t.head = append(t.head, label(c))
	}
	for _, it := range r.Metrics.Rows {
		its = append(its, strconv.Itoa(it.Iteration))
		row := []string{strconv.Itoa(it.Iteration)}
		for i, c := range RepairColumns {
			v, ok := it.Values[c]
			if !ok {
				v = math.NaN()
			}
			groups[i].values = append(groups[i].values, v)
			row = append(row, cell(it, c))
		}
		t.rows = append(t.rows, row)
	}
	p, err := barPanel("Drift repairs by kind", "iteration", "repairs", its, groups, scaleData)
	if err != nil {
		return nil, err
	}
	if p != nil {
		p.Y.Tick.Marker = integerTicks
	}
	s.plot("drift-repairs", "Drift repairs per iteration by kind", p)
	if len(r.Metrics.Rows) == 0 {
		s.para("No metrics rows yet.")
	}
	s.add(t)
	return s, nil
}

// attemptsSection shows turns and terminations per purpose and policy
// version; the histograms pool a purpose's attempts, as distributions.
func attemptsSection(r *Run) *section {
	s := &section{id: "attempts", title: "Attempts"}
	type key struct {
		purpose string
		version int64
	}
	byPurpose := map[string][]Attempt{}
	byPolicy := map[key][]Attempt{}
	for _, a := range r.Attempts {
		byPurpose[a.Purpose] = append(byPurpose[a.Purpose], a)
		k := key{a.Purpose, a.PolicyVersion}
		byPolicy[k] = append(byPolicy[k], a)
	}
	t := &table{head: []string{"purpose", "policy", "attempts", "mean turns", "max turns", "mean tokens", "terminations"}}
	var panels []*plot.Plot
	for _, purpose := range slices.SortedFunc(maps.Keys(byPurpose), purposeOrder) {
		as := byPurpose[purpose]
		turns := make([]int, len(as))
		var versions []int64
		for i, a := range as {
			turns[i] = a.Turns
			if !slices.Contains(versions, a.PolicyVersion) {
				versions = append(versions, a.PolicyVersion)
			}
		}
		slices.Sort(versions)
		for _, v := range versions {
			as := byPolicy[key{purpose, v}]
			maxTurns := 0
			var sumT, sumK float64
			term := map[string]int{}
			for _, a := range as {
				maxTurns = max(maxTurns, a.Turns)
				sumT += float64(a.Turns)
				sumK += float64(a.Tokens)
				term[a.Termination]++
			}
			var ts []string
			for _, k := range slices.Sorted(maps.Keys(term)) {
				ts = append(ts, fmt.Sprintf("%s %d", k, term[k]))
			}
			n := float64(len(as))
			t.rows = append(t.rows, []string{purpose, fmt.Sprintf("v%d", v), strconv.Itoa(len(as)), fmt.Sprintf("%.1f", sumT/n), strconv.Itoa(maxTurns),
				fmt.Sprintf("%.0f", sumK/n), strings.Join(ts, ", ")})
		}
		panels = append(panels, histPanel("Turns per attempt ("+purpose+")", "turns", turns))
	}
	s.plot("turns", "Turns per attempt", panels...)
	if len(r.Attempts) == 0 {
		s.para("No attempts yet.")
	}
	s.add(t)
	return s
}

// rewardsSection aggregates rewards per purpose and policy version (and
// iteration, where one version was sampled in several): an average over
// several policies would hide the change each made.
func rewardsSection(r *Run) *section {
	s := &section{id: "rewards", title: "Rewards"}
	type key struct {
		purpose   string
		version   int64
		iteration int
	}
	type agg struct {
		n, solved, fallback int
		sum                 float64
	}
	sums := map[key]*agg{}
	var keys []key
	for _, w := range r.Rewards {
		k := key{w.Purpose, w.PolicyVersion, w.Iteration}
		if sums[k] == nil {
			sums[k] = &agg{}
			keys = append(keys, k)
		}
		a := sums[k]
		a.n++
		a.sum += w.Reward
		if w.Fallback {
			a.fallback++
		}
		if (w.Fallback && w.Reward > 0) || (!w.Fallback && w.Total > 0 && w.Passed == w.Total) {
			a.solved++
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if c := purposeOrder(keys[i].purpose, keys[j].purpose); c != 0 {
			return c < 0
		}
		if keys[i].version != keys[j].version {
			return keys[i].version < keys[j].version
		}
		return keys[i].iteration < keys[j].iteration
	})
	t := &table{head: []string{"purpose", "policy", "iteration", "attempts", "mean reward", "solved", "binary fallback"}}
	for _, k := range keys {
		a := sums[k]
		t.rows = append(t.rows, []string{k.purpose, fmt.Sprintf("v%d", k.version), strconv.Itoa(k.iteration), strconv.Itoa(a.n), num(a.sum / float64(a.n)),
			strconv.Itoa(a.solved), strconv.Itoa(a.fallback)})
	}
	if len(keys) == 0 {
		s.para("No rewards yet.")
	}
	s.para("Reward = passed assertions × %s (binary outcome when a verifier reports no assertions), per policy version.", num(r.Config.RewardScale))
	s.add(t)
	return s
}

// purposeOrder puts training before evaluation, then any other purpose
// by name.
func purposeOrder(a, b string) int {
	rank := func(p string) int {
		switch p {
		case schemas.PurposeTrain:
			return 0
		case schemas.PurposeEval:
			return 1
		}
		return 2
	}
	if c := rank(a) - rank(b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func evalSection(r *Run) (*section, error) {
	s := &section{id: "eval", title: "Evaluation"}
	if len(r.Evals) == 0 {
		s.para("No evaluation completed.")
	}
	inAnswer := map[string]bool{}
	for _, row := range Recipe(r) {
		inAnswer[fmt.Sprint(row.Suite, row.PolicyVersion)] = true
	}
	sum := &table{caption: "other evaluations", head: []string{"suite", "policy", "tasks", "attempts", "resolve rate", "95% interval", "partial credit", "mean turns"}}
	for _, e := range r.Evals {
		if inAnswer[fmt.Sprint(e.Suite, e.PolicyVersion)] {
			continue
		}
		attempts := strconv.Itoa(e.Attempts)
		if e.Unscored > 0 {
			// The rates leave out attempts whose rollout or reward failed.
			attempts += fmt.Sprintf(" (+%d unscored)", e.Unscored)
		}
		lo, hi := Wilson(solvedAttempts(r, e), e.Attempts)
		sum.rows = append(sum.rows, []string{e.Suite, fmt.Sprintf("v%d", e.PolicyVersion), strconv.Itoa(e.Tasks), attempts,
			rate(e.ResolveRate), "[" + rate(lo) + ", " + rate(hi) + "]", num(e.MeanReward), fmt.Sprintf("%.1f", e.MeanTurns)})
	}
	s.add(sum)
	suites := evalSuites(r)
	for _, suite := range suites {
		var evs []Eval
		for _, e := range r.Evals {
			if e.Suite == suite {
				evs = append(evs, e)
			}
		}
		prefix := ""
		if len(suites) > 1 {
			prefix = suite + ": "
		}
		var versions []string
		resolve, credit := group{name: "resolve rate"}, group{name: "partial credit"}
		for _, e := range evs {
			versions = append(versions, fmt.Sprintf("v%d", e.PolicyVersion))
			resolve.values = append(resolve.values, e.ResolveRate)
			credit.values = append(credit.values, e.MeanReward)
		}
		pr, err := barPanel(prefix+"Resolve rate", "policy version", "resolve rate", versions, []group{resolve}, scaleRate)
		if err != nil {
			return nil, err
		}
		pc, err := barPanel(prefix+"Partial credit", "policy version", "partial credit", versions, []group{credit}, scaleRate)
		if err != nil {
			return nil, err
		}
		s.plot("eval-"+slug(suite), prefix+"Eval resolve rate and partial credit per policy version", pr, pc)
		for _, by := range []struct {
			id, name string
			of       func(Eval) map[string]schemas.Breakdown
		}{
			{"difficulty", "difficulty", func(e Eval) map[string]schemas.Breakdown { return e.ByDifficulty }},
			{"category", "category", func(e Eval) map[string]schemas.Breakdown { return e.ByCategory }},
		} {
			keys := map[string]bool{}
			for _, e := range evs {
				for k := range by.of(e) {
					keys[k] = true
				}
			}
			cats := slices.Sorted(maps.Keys(keys))
			var rg, cg []group
			t := &table{caption: prefix + "by " + by.name, head: []string{"suite", "policy", by.name, "attempts", "resolve rate", "partial credit"}}
			for _, e := range evs {
				g1, g2 := group{name: fmt.Sprintf("v%d", e.PolicyVersion)}, group{name: fmt.Sprintf("v%d", e.PolicyVersion)}
				for _, c := range cats {
					b, ok := by.of(e)[c]
					if !ok {
						g1.values, g2.values = append(g1.values, math.NaN()), append(g2.values, math.NaN())
						continue
					}
					g1.values = append(g1.values, b.ResolveRate)
					g2.values = append(g2.values, b.MeanReward)
					t.rows = append(t.rows, []string{suite, fmt.Sprintf("v%d", e.PolicyVersion), c, strconv.Itoa(b.Attempts), rate(b.ResolveRate), num(b.MeanReward)})
				}
				rg, cg = append(rg, g1), append(cg, g2)
			}
			p1, err := barPanel(prefix+"Resolve rate by "+by.name, by.name, "resolve rate", cats, rg, scaleRate)
			if err != nil {
				return nil, err
			}
			p2, err := barPanel(prefix+"Partial credit by "+by.name, by.name, "partial credit", cats, cg, scaleRate)
			if err != nil {
				return nil, err
			}
			s.plot("eval-"+slug(suite)+"-"+by.id, prefix+"Eval by "+by.name+" per policy version", p1, p2)
			s.add(t)
		}
	}
	if t := checksTable(r); t != nil {
		s.add(t)
	}
	if t := perTaskTable(r); t != nil {
		s.add(t)
	}
	return s, nil
}

// evalSuites lists the suites with an eval.completed, sorted.
func evalSuites(r *Run) []string {
	var out []string
	for _, e := range r.Evals {
		if !slices.Contains(out, e.Suite) {
			out = append(out, e.Suite)
		}
	}
	sort.Strings(out)
	return out
}

// checksTable shows, from the rewards of the evaluations' attempts, how
// often each verifier check passed per policy version: which skill a
// version gained or lost, where the resolve rate only says how many tasks.
// The checks are named as the verifier reports them, so a suite's tasks
// that share a check (a family of synthesised tasks) share a row.
func checksTable(r *Run) *table {
	type attempt struct {
		task    string
		attempt int
		version int64
	}
	suite := map[attempt]string{}
	for _, e := range r.EvalResults {
		suite[attempt{e.TaskID, e.Attempt, e.PolicyVersion}] = e.Suite
	}
	p := newPivot()
	for _, w := range r.Rewards {
		su, ok := suite[attempt{w.TaskID, w.Attempt, w.PolicyVersion}]
		if w.Purpose != schemas.PurposeEval || !ok {
			continue
		}
		for _, c := range w.Checks {
			p.add(pivotKey{su, c.Name}, w.PolicyVersion, c.Passed)
		}
	}
	return p.table("by check (evaluation attempts whose verifier passed the check / attempts with it)", []string{"suite", "check"}, nil)
}

// perTaskTable shows, from eval_results, each task's solved attempts per
// policy version: which tasks a version gained or lost.
func perTaskTable(r *Run) *table {
	p := newPivot()
	meta := map[pivotKey][]string{}
	for _, e := range r.EvalResults {
		k := pivotKey{e.Suite, e.TaskID}
		p.add(k, e.PolicyVersion, e.Solved)
		meta[k] = []string{e.Difficulty, e.Category}
	}
	return p.table("per task (solved / attempts, from eval_results)", []string{"suite", "task", "difficulty", "category"},
		func(k pivotKey) []string { return meta[k] })
}

// pivot counts, per row and policy version, the attempts that hit
// something (solved a task, passed a check) among those that had it.
type pivot struct {
	versions []int64
	cells    map[pivotKey]map[int64]*tally
}

// pivotKey is a row: a suite and what the row counts in it.
type pivotKey struct{ suite, name string }

// tally is one cell: attempts that hit, of those counted.
type tally struct{ hits, n int }

func newPivot() *pivot { return &pivot{cells: map[pivotKey]map[int64]*tally{}} }

func (p *pivot) add(k pivotKey, version int64, hit bool) {
	if p.cells[k] == nil {
		p.cells[k] = map[int64]*tally{}
	}
	c := p.cells[k][version]
	if c == nil {
		c = &tally{}
		p.cells[k][version] = c
	}
	c.n++
	if hit {
		c.hits++
	}
	if !slices.Contains(p.versions, version) {
		p.versions = append(p.versions, version)
	}
}

// table has a row per key, sorted, with extra's columns after the key's
// (nil: none) and a "hits/attempts" column per version; nil when empty.
func (p *pivot) table(caption string, head []string, extra func(pivotKey) []string) *table {
	if len(p.cells) == 0 {
		return nil
	}
	slices.Sort(p.versions)
	t := &table{caption: caption, head: head}
	for _, v := range p.versions {
		t.head = append(t.head, fmt.Sprintf("v%d", v))
	}
	keys := slices.SortedFunc(maps.Keys(p.cells), func(a, b pivotKey) int {
		if a.suite != b.suite {
			return strings.Compare(a.suite, b.suite)
		}
		return strings.Compare(a.name, b.name)
	})
	for _, k := range keys {
		row := []string{k.suite, k.name}
		if extra != nil {
			row = append(row, extra(k)...)
		}
		for _, v := range p.versions {
			if c := p.cells[k][v]; c != nil {
				row = append(row, fmt.Sprintf("%d/%d", c.hits, c.n))
			} else {
				row = append(row, "–")
			}
		}
		t.rows = append(t.rows, row)
	}
	return t
}

func variantsSection(runs []*Run) (*section, error) {
	s := &section{id: "variants", title: "Variants"}
	s.para("%s compared with %d other run(s); per-iteration lines of every run are overlaid in the training plots.", runs[0].ID, len(runs)-1)
	t := &table{head: []string{""}}
	for _, r := range runs {
		t.head = append(t.head, r.ID)
	}
	row := func(name string, f func(*Run) string) {
		cells := []string{name}
		for _, r := range runs {
			cells = append(cells, f(r))
		}
		t.rows = append(t.rows, cells)
	}
	last := func(col string) func(*Run) string {
		return func(r *Run) string {
			if v, ok := r.Metrics.Last(col); ok {
				return num(v)
			}
			return "–"
		}
	}
	row("status", func(r *Run) string { return r.Status })
	row("routing replay", func(r *Run) string { return strings.TrimPrefix(replayLabel(r), "replay ") })
	row("iterations", func(r *Run) string { return strconv.Itoa(len(iterationsDone(r))) })
	row("final reward mean", last(ColRewardMean))
	row("final resolve rate", last(ColResolveRate))
	row("final explained variance", last(ColExplainedVariance))
	row("final log-prob gap", last(ColLogProbGap))
	row("mean log-prob gap", func(r *Run) string {
		if l := series(r, ColLogProbGap, ""); len(l.ys) > 0 {
			return num(mean(l.ys))
		}
		return "–"
	})
	for _, col := range []string{ColRoutingFlips, ColApproxKL, ColLiveKL, ColExpertsSwitched, ColGradNorm} {
		for _, r := range runs {
			if r.Metrics.Has(col) {
				row("final "+label(col), last(col))
				break
			}
		}
	}
	var suites []string
	for _, r := range runs {
		for _, su := range evalSuites(r) {
			if !slices.Contains(suites, su) {
				suites = append(suites, su)
			}
		}
	}
	sort.Strings(suites)
	for _, su := range suites {
		for _, which := range []string{"first", "last"} {
			row(fmt.Sprintf("eval %s, %s policy: resolve rate / partial credit", su, which), func(r *Run) string {
				var evs []Eval
				for _, e := range r.Evals {
					if e.Suite == su {
						evs = append(evs, e)
					}
				}
				if len(evs) == 0 {
					return "–"
				}
				e := evs[0]
				if which == "last" {
					e = evs[len(evs)-1]
				}
				return fmt.Sprintf("%s / %s (v%d)", rate(e.ResolveRate), num(e.MeanReward), e.PolicyVersion)
			})
		}
	}
	s.add(t)
	return s, nil
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// num formats a value compactly: whole numbers as integers, others with
// four significant digits.
func num(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func rate(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func slug(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}
