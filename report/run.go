// Package report gathers what one run did — from its events and its
// Parquet tables — and renders it as Markdown and as one self-contained
// HTML page with plots, optionally beside other runs (ablations).
//
// Load reads the facts; Render turns them into documents. A Run is plain
// data (it round-trips through JSON), so a report can be rendered from a
// hand-built Run as well as from a live log and store.
package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/lineage"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trainer"
)

// Run statuses.
const (
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusRunning   = "running" // neither run.completed nor run.failed yet
	// StatusUnstarted is a run with events but no run.started (a branch
	// an older t1 replay wrote from another run's inputs).
	StatusUnstarted = "unstarted"
	// StatusReplayed is a branch that re-ran one stage and nothing after
	// it (t1 replay without --continue).
	StatusReplayed = "replayed"
)

// openStatus is the status of a run that has neither completed nor
// failed.
func openStatus(started bool, b *schemas.BranchPoint) string {
	switch {
	case !started:
		return StatusUnstarted
	case b != nil && !b.Continue:
		return StatusReplayed
	}
	return StatusRunning
}

// Run is everything a report shows about one run.
type Run struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"` // why the run failed
	// Started and Ended are the publish times of run.started and of
	// run.completed or run.failed (zero while running).
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	Config  Config    `json:"config"`
	// Events counts the run's events by type.
	Events map[string]uint64 `json:"events"`
	// Failed counts <type>.failed events other than run.failed;
	// DeadLetters the run's messages in the dead-letter stream.
	Failed        uint64       `json:"failed"`
	DeadLetters   uint64       `json:"dead_letters"`
	PolicyVersion int64        `json:"policy_version"` // the latest
	Pools         []Pool       `json:"pools,omitempty"`
	SFT           []SFT        `json:"sft,omitempty"`
	Metrics       Metrics      `json:"metrics"`
	Attempts      []Attempt    `json:"attempts,omitempty"`
	Rewards       []Reward     `json:"rewards,omitempty"`
	Evals         []Eval       `json:"evals,omitempty"`
	EvalResults   []EvalResult `json:"eval_results,omitempty"`
	// Updates are the policy updates in order, with the critic's view of
	// their batch.
	Updates []Update `json:"updates,omitempty"`
}

// Update is one iteration's critic and actor update, as their events
// tell it.
type Update struct {
	Iteration         int     `json:"iteration"`
	PolicyVersion     int64   `json:"policy_version"` // the new version
	Skipped           string  `json:"skipped,omitempty"`
	WarmupEnd         string  `json:"warmup_end,omitempty"`
	ExplainedVariance float64 `json:"explained_variance"`
	ClipFraction      float64 `json:"clip_fraction"`
}

// Config is what run.started fixed for the whole run.
type Config struct {
	Seed        uint64            `json:"seed"`
	RewardScale float64           `json:"reward_scale"`
	Iterations  int               `json:"iterations"`
	ConfigHash  string            `json:"config_hash,omitempty"`
	Model       schemas.ModelDims `json:"model"`
	EvalSuites  []string          `json:"eval_suites,omitempty"`
	Parent      string            `json:"parent,omitempty"` // the run a branch was replayed from
	// Branch is where a branch left its parent, and what it changed.
	Branch *schemas.BranchPoint `json:"branch,omitempty"`
}

// Pool is one sealed version of the training pool.
type Pool struct {
	Version    int            `json:"version"`
	Tasks      int            `json:"tasks"`
	Excluded   int            `json:"excluded"`
	Categories map[string]int `json:"categories"`
}

// SFT is one supervised fine-tuning step of the run.
type SFT struct {
	PolicyVersion int64   `json:"policy_version"`
	Loss          float64 `json:"loss"`
	// Demonstrations is how many pool tasks' demonstrations it trained on
	// (fewer than the pool's tasks when stages.control.rl_tasks keeps
	// some for the iterations).
	Demonstrations int `json:"demonstrations,omitempty"`
	// Unsolved is how many demonstrations were left out because their
	// replay did not pass the task's verifier.
	Unsolved int `json:"unsolved,omitempty"`
}

// Metrics is the run's metrics table. Columns are read by name, so files
// of every minor version load: a column a file lacks is absent from its
// rows' Values.
type Metrics struct {
	// Columns lists the numeric columns found, in the order first seen.
	Columns []string `json:"columns,omitempty"`
	// Versions lists the schema versions of the files read, sorted.
	Versions []string    `json:"versions,omitempty"`
	Rows     []Iteration `json:"rows,omitempty"`
}

// Iteration is one metrics row.
type Iteration struct {
	Iteration     int                `json:"iteration"`
	PolicyVersion int64              `json:"policy_version"`
	Values        map[string]float64 `json:"values"`
	// Replay says whether the actor update replayed the sampler's routing
	// (from the trainer's report); nil when the report is missing.
	Replay *bool `json:"replay,omitempty"`
}

// Metrics columns the report names and plots.
const (
	ColRewardMean        = "reward_mean"
	ColResolveRate       = "resolve_rate"
	ColExplainedVariance = "explained_variance"
	ColLogProbGap        = "logprob_gap"
	ColClipFraction      = "clip_fraction"
	ColPolicyLoss        = "policy_loss"
	ColValueLoss         = "value_loss"
	ColRoutingFlips      = "routing_flip_rate"
	ColApproxKL          = "approx_kl"
	ColGradNorm          = "grad_norm"
	ColLiveKL            = "live_kl"
	ColExpertsSwitched   = "experts_switched"
	ColRoutingMismatches = "routing_mismatches"
	ColLossDrift         = "loss_drift"
	ColStrictPrefix      = "repairs_strict_prefix"
	ColClippedNorm       = "repairs_clipped_norm"
	ColTextRetokened     = "repairs_text_retokened"
	ColNewChunk          = "repairs_new_chunk"
	// From the trainer's report of a stale batch's update
	// (training.max_staleness), shown where an update had one.
	ColStaleness   = "staleness"
	ColBehaviourKL = "behaviour_kl"
	ColTruncated   = "truncated"
)

// RepairColumns are the drift-repair counters, one per repair kind.
var RepairColumns = []string{ColStrictPrefix, ColClippedNorm, ColTextRetokened, ColNewChunk}

// Value returns column col of the row, and whether the row has it.
func (it Iteration) Value(col string) (float64, bool) {
	v, ok := it.Values[col]
	return v, ok
}

// Last returns the value of col in the last row that has it.
func (m Metrics) Last(col string) (float64, bool) {
	for i := len(m.Rows) - 1; i >= 0; i-- {
		if v, ok := m.Rows[i].Values[col]; ok {
			return v, true
		}
	}
	return 0, false
}

// Has reports whether any row has col.
func (m Metrics) Has(col string) bool { return slices.Contains(m.Columns, col) }

// Attempt is one trajectories row.
type Attempt struct {
	TaskID        string `json:"task_id"`
	Attempt       int    `json:"attempt"`
	Iteration     int    `json:"iteration"`
	Purpose       string `json:"purpose"`
	Suite         string `json:"suite,omitempty"`
	PolicyVersion int64  `json:"policy_version"`
	Turns         int    `json:"turns"`
	Tokens        int64  `json:"tokens"`
	Termination   string `json:"termination"`
}

// Reward is one rewards row.
type Reward struct {
	TaskID        string  `json:"task_id"`
	Attempt       int     `json:"attempt"`
	Iteration     int     `json:"iteration"`
	Purpose       string  `json:"purpose"`
	PolicyVersion int64   `json:"policy_version"`
	Reward        float64 `json:"reward"`
	Passed        int     `json:"passed"`
	Total         int     `json:"total"`
	Fallback      bool    `json:"fallback"`
	// Checks are the verifier's assertions, each passed or not.
	Checks []schemas.Assertion `json:"checks,omitempty"`
}

// Eval is one eval.completed: a suite against one policy version.
type Eval struct {
	Suite         string                       `json:"suite"`
	PolicyVersion int64                        `json:"policy_version"`
	Tasks         int                          `json:"tasks"`
	Attempts      int                          `json:"attempts"`
	Unscored      int                          `json:"unscored,omitempty"` // attempts whose rollout or reward failed
	ResolveRate   float64                      `json:"resolve_rate"`
	MeanReward    float64                      `json:"mean_reward"` // partial credit
	MeanTurns     float64                      `json:"mean_turns"`
	ByDifficulty  map[string]schemas.Breakdown `json:"by_difficulty,omitempty"`
	ByCategory    map[string]schemas.Breakdown `json:"by_category,omitempty"`
	// From is the ancestor run that made this evaluation, for one a
	// continued branch took over with the policy it evaluated ("": this
	// run's own).
	From string `json:"from,omitempty"`
}

// EvalResult is one eval_results row.
type EvalResult struct {
	Suite         string  `json:"suite"`
	TaskID        string  `json:"task_id"`
	Attempt       int     `json:"attempt"`
	PolicyVersion int64   `json:"policy_version"`
	Reward        float64 `json:"reward"`
	Solved        bool    `json:"solved"`
	Turns         int     `json:"turns"`
	Difficulty    string  `json:"difficulty"`
	Category      string  `json:"category"`
}

// Load gathers everything the report shows about run: its events from
// log (a replay of t1.<run>.>, which leaves no state on the server) and
// its metrics, trajectories, rewards and eval_results tables from st.
// It works on a run in progress too (Status running) and on a branch
// that only replayed a stage (Status replayed). A run without events is an error listing the runs
// the log holds; so is a table object that does not read, naming it.
func Load(ctx context.Context, log *engine.Log, st store.ObjectStore, run string) (*Run, error) {
	r, err := loadHead(ctx, log, run)
	if err != nil {
		return nil, err
	}
	if err := r.loadMetrics(ctx, st); err != nil {
		return nil, err
	}
	if err := r.loadTrajectories(ctx, st); err != nil {
		return nil, err
	}
	if err := r.loadRewards(ctx, st); err != nil {
		return nil, err
	}
	if err := r.loadEvalResults(ctx, st); err != nil {
		return nil, err
	}
	return r, nil
}

// LoadOverview is Load of what a run's overview shows, its events and its
// metrics table, without the per-attempt tables, which grow with the run.
// A metrics object that does not read is the error returned beside the
// Run, whose events are loaded: the overview shows what it has.
func LoadOverview(ctx context.Context, log *engine.Log, st store.ObjectStore, run string) (*Run, error) {
	r, err := loadHead(ctx, log, run)
	if err != nil {
		return nil, err
	}
	return r, r.loadMetrics(ctx, st)
}

// loadHead is a run's events and dead letters.
func loadHead(ctx context.Context, log *engine.Log, run string) (*Run, error) {
	if err := keys.ValidRun(run); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	r := &Run{ID: run, Status: StatusRunning, Events: map[string]uint64{}}
	if err := r.loadEvents(ctx, log); err != nil {
		return nil, err
	}
	if len(r.Events) == 0 {
		return nil, unknownRun(ctx, log, run)
	}
	if r.Status == StatusRunning {
		r.Status = openStatus(r.Events[schemas.RunStarted] > 0, r.Config.Branch)
	}
	dead, err := log.DeadLetterCounts(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("report: run %s: %w", run, err)
	}
	r.DeadLetters = dead.Total()
	return r, nil
}

// inheritedFacts are the events of its ancestors a continued branch's
// report folds as its own facts: the pool it trains on, the fine-tuning,
// updates and evaluations of the policies it took over. They are not
// counted among the branch's events, which are what the branch did.
var inheritedFacts = map[string]bool{schemas.PoolSealed: true, schemas.SFTRequested: true, schemas.SFTCompleted: true,
	schemas.CriticUpdated: true, schemas.PolicyUpdated: true, schemas.EvalCompleted: true}

func (r *Run) loadEvents(ctx context.Context, log *engine.Log) error {
	// A continued branch's history is what it took over from its parent
	// (lineage.Cut), then its own; for any other run it is its own events.
	var demos schemas.SFTRequestedPayload // the one before an sft.completed
	err := lineage.History(ctx, log, r.ID, nil, func(ev engine.Event) error {
		if ev.Run != r.ID && !inheritedFacts[ev.Type] {
			return nil
		}
		if ev.Run == r.ID {
			r.Events[ev.Type]++
		}
		if strings.HasSuffix(ev.Type, ".failed") && ev.Type != schemas.RunFailed {
			r.Failed++
		}
		switch ev.Type {
		case schemas.RunStarted:
			var p schemas.RunStartedPayload
			if err := decode(ev, &p); err != nil {
				return err
			}
			r.Started = ev.Time.UTC()
			r.Config = Config{Seed: p.Seed, RewardScale: p.RewardScale, Iterations: p.Iterations, ConfigHash: p.ConfigHash,
				Model: p.Model, EvalSuites: p.EvalSuites, Parent: p.Parent, Branch: p.Branch}
		case schemas.RunCompleted, schemas.RunFailed:
			var p schemas.RunCompletedPayload
			if err := decode(ev, &p); err != nil {
				return err
			}
			r.Ended = ev.Time.UTC()
			r.Status, r.Reason = StatusCompleted, ""
			if ev.Type == schemas.RunFailed {
				r.Status, r.Reason = StatusFailed, p.Reason
			}
		case schemas.PoolSealed:
			var p schemas.PoolSealedPayload
			if err := decode(ev, &p); err != nil {
				return err
			}
			r.Pools = append(r.Pools, Pool{Version: p.PoolVersion, Tasks: p.Tasks, Excluded: p.Excluded, Categories: p.Categories})
		case schemas.SFTRequested:
			if err := decode(ev, &demos); err != nil {
				return err
			}
		case schemas.SFTCompleted:
			var p schemas.SFTCompletedPayload
			if err := decode(ev, &p); err != nil {
				return err
			}
			r.SFT = append(r.SFT, SFT{PolicyVersion: p.PolicyVersion, Loss: p.Loss, Demonstrations: len(demos.Data), Unsolved: demos.Unsolved})
			r.PolicyVersion = max(r.PolicyVersion, p.PolicyVersion)
		case schemas.CriticUpdated:
			var p schemas.CriticUpdatedPayload
			if err := decode(ev, &p); err != nil {
				return err
			}
			u := r.update(p.Iteration)
			u.WarmupEnd, u.ExplainedVariance = p.WarmupEnd, p.ExplainedVariance
		case schemas.PolicyUpdated:
			var p schemas.PolicyUpdatedPayload
			if err := decode(ev, &p); err != nil {
				return err
			}
			r.PolicyVersion = max(r.PolicyVersion, p.PolicyVersion)
			u := r.update(p.Iteration)
			u.PolicyVersion, u.Skipped, u.ClipFraction = p.PolicyVersion, p.Skipped, p.ClipFraction
		case schemas.EvalCompleted:
			var p schemas.EvalCompletedPayload
			if err := decode(ev, &p); err != nil {
				return err
			}
			e := Eval{Suite: p.Suite, PolicyVersion: p.PolicyVersion, Tasks: p.Tasks, Attempts: p.Attempts, Unscored: p.Unscored,
				ResolveRate: p.ResolveRate, MeanReward: p.MeanReward, MeanTurns: p.MeanTurns,
				ByDifficulty: p.ByDifficulty, ByCategory: p.ByCategory}
			if ev.Run != r.ID {
				e.From = ev.Run
			}
			r.Evals = append(r.Evals, e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("report: run %s: events: %w", r.ID, err)
	}
	sort.SliceStable(r.Pools, func(i, j int) bool { return r.Pools[i].Version < r.Pools[j].Version })
	sort.SliceStable(r.SFT, func(i, j int) bool { return r.SFT[i].PolicyVersion < r.SFT[j].PolicyVersion })
	sort.SliceStable(r.Evals, func(i, j int) bool {
		if r.Evals[i].Suite != r.Evals[j].Suite {
			return r.Evals[i].Suite < r.Evals[j].Suite
		}
		return r.Evals[i].PolicyVersion < r.Evals[j].PolicyVersion
	})
	return nil
}

func decode(ev engine.Event, v any) error {
	if err := ev.Decode(v); err != nil {
		return fmt.Errorf("%s event %s (seq %d): %w", ev.Type, ev.ID, ev.Seq, err)
	}
	return nil
}

// unknownRun explains a run without events, naming the runs that have
// some.
func unknownRun(ctx context.Context, log *engine.Log, run string) error {
	runs, err := log.Runs(ctx)
	if err != nil {
		return fmt.Errorf("report: unknown run %q (no events); listing runs: %w", run, err)
	}
	if len(runs) == 0 {
		return fmt.Errorf("report: unknown run %q: the log holds no events", run)
	}
	return fmt.Errorf("report: unknown run %q (no events); runs in the log: %s", run, strings.Join(runs, ", "))
}

// objects lists the Parquet objects of one of the run's tables, sorted,
// each row in one of them whether or not the table was compacted.
func objects(ctx context.Context, st store.ObjectStore, run string, t schemas.Table) ([]string, error) {
	objs, err := schemas.TableObjects(ctx, st, run, t)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	sort.Strings(objs)
	return objs, nil
}

// eachRow calls fn for every row of every object of table t in the run.
func eachRow(ctx context.Context, st store.ObjectStore, run string, t schemas.Table, fn func(key string, v schemas.Version, c *cols, i int)) error {
	objs, err := objects(ctx, st, run, t)
	if err != nil {
		return err
	}
	for _, key := range objs {
		if err := readObject(ctx, st, key, t, fn); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}

func loadRows[T any](ctx context.Context, st store.ObjectStore, run string, t schemas.Table, row func(c *cols, i int) T) ([]T, error) {
	var out []T
	err := eachRow(ctx, st, run, t, func(_ string, _ schemas.Version, c *cols, i int) { out = append(out, row(c, i)) })
	return out, err
}

func (r *Run) loadMetrics(ctx context.Context, st store.ObjectStore) error {
	versions := map[string]bool{}
	err := eachRow(ctx, st, r.ID, schemas.MetricsTable, func(_ string, v schemas.Version, c *cols, i int) {
		versions[v.String()] = true
		it := Iteration{Iteration: c.int("iteration", i), PolicyVersion: int64(c.int("policy_version", i)), Values: map[string]float64{}}
		for _, name := range c.numeric() {
			if name == "iteration" || name == "policy_version" {
				continue
			}
			if x, ok := c.num(name, i); ok {
				it.Values[name] = x
				if !slices.Contains(r.Metrics.Columns, name) {
					r.Metrics.Columns = append(r.Metrics.Columns, name)
				}
			}
		}
		r.Metrics.Rows = append(r.Metrics.Rows, it)
	})
	if err != nil {
		return err
	}
	for v := range versions {
		r.Metrics.Versions = append(r.Metrics.Versions, v)
	}
	sort.Strings(r.Metrics.Versions)
	sort.SliceStable(r.Metrics.Rows, func(i, j int) bool {
		a, b := r.Metrics.Rows[i], r.Metrics.Rows[j]
		if a.Iteration != b.Iteration {
			return a.Iteration < b.Iteration
		}
		return a.PolicyVersion < b.PolicyVersion
	})
	stale := false
	for i := range r.Metrics.Rows {
		it := &r.Metrics.Rows[i]
		met, err := trainingReport(ctx, st, r.ID, it.Iteration, it.PolicyVersion)
		if err != nil {
			return err
		}
		if met == nil {
			continue
		}
		it.Replay = &met.Replay
		if met.Staleness > 0 || met.BehaviourKL > 0 {
			stale = true
			if it.Values == nil {
				it.Values = map[string]float64{}
			}
			it.Values[ColStaleness], it.Values[ColBehaviourKL], it.Values[ColTruncated] = float64(met.Staleness), met.BehaviourKL, met.Truncated
		}
	}
	if stale {
		r.Metrics.Columns = append(r.Metrics.Columns, ColStaleness, ColBehaviourKL, ColTruncated)
	}
	return nil
}

// trainingReport reads the metrics of the update that made policy version
// v from the trainer's report; nil when there is none.
func trainingReport(ctx context.Context, st store.ObjectStore, run string, iteration int, v int64) (*trainer.ActorMetrics, error) {
	key := keys.TrainingReport(run, iteration, v)
	rc, _, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", key, err)
	}
	defer rc.Close()
	var rep trainer.TrainingReport
	if err := json.NewDecoder(io.LimitReader(rc, 1<<20)).Decode(&rep); err != nil {
		return nil, fmt.Errorf("report: %s: %w", key, err)
	}
	return &rep.Metrics, nil
}

func (r *Run) loadTrajectories(ctx context.Context, st store.ObjectStore) error {
	var err error
	r.Attempts, err = loadRows(ctx, st, r.ID, schemas.TrajectoriesTable, func(c *cols, i int) Attempt {
		return Attempt{TaskID: c.str("task_id", i), Attempt: c.int("attempt", i), Iteration: c.int("iteration", i),
			Purpose: c.str("purpose", i), Suite: c.str("suite", i), PolicyVersion: int64(c.int("policy_version", i)),
			Turns: c.int("turns", i), Tokens: int64(c.int("tokens", i)), Termination: c.str("termination", i)}
	})
	sort.SliceStable(r.Attempts, func(i, j int) bool {
		a, b := r.Attempts[i], r.Attempts[j]
		return attemptKey(a.Purpose, a.Iteration, a.PolicyVersion, a.TaskID, a.Attempt) < attemptKey(b.Purpose, b.Iteration, b.PolicyVersion, b.TaskID, b.Attempt)
	})
	return err
}

func (r *Run) loadRewards(ctx context.Context, st store.ObjectStore) error {
	var err error
	r.Rewards, err = loadRows(ctx, st, r.ID, schemas.RewardsTable, func(c *cols, i int) Reward {
		return Reward{TaskID: c.str("task_id", i), Attempt: c.int("attempt", i), Iteration: c.int("iteration", i),
			Purpose: c.str("purpose", i), PolicyVersion: int64(c.int("policy_version", i)), Reward: c.float("reward", i),
			Passed: c.int("passed", i), Total: c.int("total", i), Fallback: c.bool("fallback", i), Checks: c.checks("assertions", i)}
	})
	sort.SliceStable(r.Rewards, func(i, j int) bool {
		a, b := r.Rewards[i], r.Rewards[j]
		return attemptKey(a.Purpose, a.Iteration, a.PolicyVersion, a.TaskID, a.Attempt) < attemptKey(b.Purpose, b.Iteration, b.PolicyVersion, b.TaskID, b.Attempt)
	})
	return err
}

func (r *Run) loadEvalResults(ctx context.Context, st store.ObjectStore) error {
	var err error
	r.EvalResults, err = loadRows(ctx, st, r.ID, schemas.EvalResultsTable, func(c *cols, i int) EvalResult {
		return EvalResult{Suite: c.str("suite", i), TaskID: c.str("task_id", i), Attempt: c.int("attempt", i),
			PolicyVersion: int64(c.int("policy_version", i)), Reward: c.float("reward", i), Solved: c.bool("solved", i),
			Turns: c.int("turns", i), Difficulty: c.str("difficulty", i), Category: c.str("category", i)}
	})
	sort.SliceStable(r.EvalResults, func(i, j int) bool {
		a, b := r.EvalResults[i], r.EvalResults[j]
		return attemptKey(a.Suite, 0, a.PolicyVersion, a.TaskID, a.Attempt) < attemptKey(b.Suite, 0, b.PolicyVersion, b.TaskID, b.Attempt)
	})
	return err
}

// attemptKey orders attempts the same way whatever order the store lists
// their objects in.
func attemptKey(group string, iteration int, version int64, task string, attempt int) string {
	return fmt.Sprintf("%s\x00%08d\x00%012d\x00%s\x00%08d", group, iteration, version, task, attempt)
}

// update returns iteration i's Update, adding it in iteration order.
func (r *Run) update(i int) *Update {
	for k := range r.Updates {
		if r.Updates[k].Iteration == i {
			return &r.Updates[k]
		}
	}
	r.Updates = append(r.Updates, Update{Iteration: i})
	slices.SortFunc(r.Updates, func(a, b Update) int { return a.Iteration - b.Iteration })
	return r.update(i)
}
