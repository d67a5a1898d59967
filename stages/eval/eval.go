// Package eval measures a policy on held-out suites.
//
//	eval.requested ─▶ eval ─▶ rollout.requested (purpose eval) × tasks × k
//	reward.scored (purpose eval) ─▶ eval ─▶ eval.completed  (+ eval_results rows)
//
// A suite is either built in — tasks grown by taskgen from a seed stream
// of its own, so they never share seeds with training, each kept only if
// its reference solution passes — or a list of Harbor task directories.
// Every attempt gets a fresh sandbox (the rollout stage's). Results are
// aggregated per suite and policy version: resolve rate, mean partial
// credit (passed / total assertions, 1 for a solved task without
// per-assertion report), mean turns, and breakdowns by difficulty and
// category.
package eval

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trial"
)

// Suite is one held-out suite.
type Suite struct {
	// Builtin grows Tasks tasks through Rounds extensions from Seed.
	Builtin bool
	Tasks   int
	Rounds  int
	Seed    uint64
	Library taskgen.Library
	// Dirs are Harbor task directories (or dataset roots holding them).
	Dirs []string
}

// Task is one task of a materialised suite.
type Task struct {
	ID, Category, Difficulty string
	Bundle                   schemas.ObjectRef
}

// StageConfig wires the stage.
type StageConfig struct {
	Log      *engine.Log
	Store    store.ObjectStore
	Trial    trial.Options
	Suites   map[string]Suite
	MaxTurns int
	TempDir  string
}

// NewStage returns the eval stage; it folds attempts, so it is
// engine.Serial: its runner handles one event at a time.
func NewStage(cfg StageConfig) engine.Stage {
	return serial{engine.NewStage("eval", append([]string{schemas.EvalRequested}, folded...), newStage(cfg).handle)}
}

type serial struct{ engine.Stage }

func (serial) Serial() bool { return true }

func newStage(cfg StageConfig) *stage {
	return &stage{cfg: cfg, suites: map[string][]Task{}, folds: map[key]*fold{}, loaded: map[string]bool{},
		seen: map[string]bool{}, reqs: map[string]key{}}
}

// folded are the types eval folds; it also consumes eval.requested, which
// it acts on without folding.
var folded = []string{schemas.RolloutRequested, schemas.RolloutCompleted, schemas.RewardScored,
	engine.FailedType(schemas.RolloutRequested), engine.FailedType(schemas.RolloutCompleted), schemas.EvalCompleted}

type key struct {
	run, suite string
	version    int64
}

type attempt struct {
	task  string
	n     int
	turns int
	score *schemas.RewardScoredPayload
}

type fold struct {
	// iteration is the one the evaluation's rollouts name, where its
	// results are stored.
	iteration int
	requested int
	failed    int
	attempts  map[string]*attempt // task/attempt
	done      bool
}

type stage struct {
	cfg    StageConfig
	mu     sync.Mutex
	loaded map[string]bool   // runs folded from the log
	suites map[string][]Task // run/suite → tasks
	folds  map[key]*fold
	seen   map[string]bool
	reqs   map[string]key // rollout.requested / rollout.completed id → eval
}

func (s *stage) fold(k key) *fold {
	if s.folds[k] == nil {
		s.folds[k] = &fold{attempts: map[string]*attempt{}}
	}
	return s.folds[k]
}

func attemptID(task string, n int) string { return fmt.Sprintf("%s#%d", task, n) }

func (s *stage) handle(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The first event of a run folds what the log holds of it (the state a
	// restarted eval continues from), reading no other run's events.
	if !s.loaded[ev.Run] {
		err := s.cfg.Log.ReplayRun(ctx, ev.Run, folded, func(e engine.Event) error {
			s.apply(e)
			return nil
		})
		if err != nil {
			return fmt.Errorf("eval: fold run %s: %w", ev.Run, err)
		}
		s.loaded[ev.Run] = true
	}
	if ev.Type == schemas.EvalRequested {
		return s.request(ctx, ev, out)
	}
	s.apply(ev)
	return s.settle(ctx, ev.Run, out)
}

// apply folds one event once.
func (s *stage) apply(ev engine.Event) {
	if s.seen[ev.ID] {
		return
	}
	s.seen[ev.ID] = true
	switch ev.Type {
	case schemas.RolloutRequested:
		var p schemas.RolloutRequestedPayload
		if ev.Decode(&p) == nil && p.Purpose == "eval" {
			k := key{ev.Run, p.Suite, p.PolicyVersion}
			s.reqs[ev.ID] = k
			f := s.fold(k)
			f.iteration = p.Iteration
			f.requested++
			f.attempts[attemptID(p.TaskID, p.Attempt)] = &attempt{task: p.TaskID, n: p.Attempt}
		}
	case schemas.RolloutCompleted:
		var p schemas.RolloutCompletedPayload
		if ev.Decode(&p) == nil && p.Purpose == "eval" {
			k := key{ev.Run, p.Suite, p.PolicyVersion}
			s.reqs[ev.ID] = k
			if a := s.fold(k).attempts[attemptID(p.TaskID, p.Attempt)]; a != nil {
				a.turns = p.Turns
			}
		}
	case engine.FailedType(schemas.RolloutRequested), engine.FailedType(schemas.RolloutCompleted):
		var f engine.Failure
		if ev.Decode(&f) == nil {
			if k, ok := s.reqs[f.EventID]; ok {
				s.fold(k).failed++
			}
		}
	case schemas.RewardScored:
		var p schemas.RewardScoredPayload
		if ev.Decode(&p) == nil && p.Purpose == "eval" {
			if a := s.fold(key{ev.Run, p.Suite, p.PolicyVersion}).attempts[attemptID(p.TaskID, p.Attempt)]; a != nil {
				a.score = &p
			}
		}
	case schemas.EvalCompleted:
		var p schemas.EvalCompletedPayload
		if ev.Decode(&p) == nil {
			s.fold(key{ev.Run, p.Suite, p.PolicyVersion}).done = true
		}
	}
}

// attemptSeed is the sampling seed of a task's attempt. Each task and
// attempt draws from a stream of its own: with one stream per attempt
// index shared by every task, attempt k of every task drew the same
// random numbers at the same positions, so one unlucky draw failed the
// same attempt of every task alike and k attempts of n tasks measured
// like k. The seed does not depend on the policy version, so every policy
// of a run meets the same draws (a paired comparison).
func attemptSeed(task string, attempt int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "eval/%s/%d", task, attempt)
	return h.Sum64()
}

// request materialises the suite in the run and fans out its attempts.
func (s *stage) request(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	var p schemas.EvalRequestedPayload
	if err := ev.Decode(&p); err != nil {
		return err
	}
	if p.Attempts <= 0 || p.Attempts > 100 {
		return engine.Permanent(fmt.Errorf("eval.requested: %d attempts per task", p.Attempts))
	}
	tasks, err := s.materialise(ctx, ev.Run, p.Suite)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		for a := range p.Attempts {
			r := schemas.RolloutRequestedPayload{
				TaskID: t.ID, Attempt: a, Purpose: "eval", Suite: p.Suite, PolicyVersion: p.PolicyVersion, Iteration: p.Iteration,
				Seed: attemptSeed(t.ID, a), MaxTurns: s.cfg.MaxTurns, Bundle: t.Bundle,
			}
			if _, err := out.Emit(schemas.RolloutRequested, r, engine.WithKey(attemptID(t.ID, a))); err != nil {
				return err
			}
		}
	}
	return nil
}

// DirTask is a Harbor task of a suite's directories, with the id the
// suite gives it ("eval-" and the first 12 hex digits of its content hash).
type DirTask struct {
	ID   string
	Dir  string
	Task *harbor.Task
}

// LoadDirs loads a suite's Harbor directories in order: a directory with a
// task.toml is one task, any other is a dataset root whose every
// subdirectory is a task. A directory that does not load fails the whole
// list, naming it.
func LoadDirs(dirs []string) ([]DirTask, error) {
	var out []DirTask
	for _, d := range dirs {
		taskDirs := []string{d}
		if _, err := os.Stat(filepath.Join(d, harbor.ConfigFile)); errors.Is(err, os.ErrNotExist) {
			ents, err := os.ReadDir(d)
			if err != nil {
				return nil, err
			}
			taskDirs = taskDirs[:0]
			for _, e := range ents {
				if e.IsDir() {
					taskDirs = append(taskDirs, filepath.Join(d, e.Name()))
				}
			}
		}
		for _, dir := range taskDirs {
			t, err := harbor.Load(dir)
			if err != nil {
				return nil, err
			}
			h, err := t.Hash()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", dir, err)
			}
			out = append(out, DirTask{ID: "eval-" + h[:12], Dir: dir, Task: t})
		}
	}
	return out, nil
}

// References fingerprints every task of su, named by its id in the suite:
// the built-in tasks (whether or not their reference solutions pass) and
// the tasks of its Harbor directories.
func References(su Suite) ([]harbor.Reference, error) {
	var refs []harbor.Reference
	if su.Builtin {
		for _, steps := range taskgen.Suite(su.Library, su.Seed, su.Tasks, su.Rounds) {
			sp, err := taskgen.Build(steps)
			if err != nil {
				return nil, err
			}
			t, err := sp.Task(0)
			if err != nil {
				return nil, err
			}
			refs = append(refs, harbor.Reference{Name: "eval-" + sp.ID(), Print: harbor.FingerprintOf(t)})
		}
	}
	dts, err := LoadDirs(su.Dirs)
	if err != nil {
		return nil, err
	}
	for _, dt := range dts {
		refs = append(refs, harbor.Reference{Name: dt.ID, Print: harbor.FingerprintOf(dt.Task)})
	}
	return refs, nil
}

// materialise stores the suite's task bundles in the run (idempotent) and
// returns its tasks.
func (s *stage) materialise(ctx context.Context, run, name string) ([]Task, error) {
	if ts, ok := s.suites[run+"/"+name]; ok {
		return ts, nil
	}
	su, ok := s.cfg.Suites[name]
	if !ok {
		return nil, engine.Permanent(fmt.Errorf("eval: unknown suite %q", name))
	}
	var tasks []Task
	put := func(t *harbor.Task, id string) error {
		key, sum, size, err := trial.PutBundle(ctx, s.cfg.Store, run, id, t)
		if err != nil {
			return err
		}
		md := t.Config.Metadata
		tasks = append(tasks, Task{ID: id, Category: md.Category, Difficulty: md.Difficulty,
			Bundle: schemas.ObjectRef{Key: key, Bytes: size, SHA256: sum}})
		return nil
	}
	if su.Builtin {
		work, releaseWork, err := hostres.MkdirTemp(s.cfg.TempDir, "t1-eval-", "eval scratch")
		if err != nil {
			return nil, err
		}
		defer releaseWork()
		for _, refs := range taskgen.Suite(su.Library, su.Seed, su.Tasks, su.Rounds) {
			sp, err := taskgen.Build(refs)
			if err != nil {
				return nil, engine.Permanent(err)
			}
			t, err := sp.Task(0)
			if err != nil {
				return nil, engine.Permanent(err)
			}
			id := "eval-" + sp.ID()
			// A suite task counts only if its reference solution passes.
			dir := filepath.Join(work, id)
			if err := t.Write(dir); err != nil {
				return nil, err
			}
			o, err := trial.Run(ctx, dir, t, trial.Oracle(dir), s.cfg.Trial)
			if err != nil {
				return nil, err
			}
			if o.SolutionExit != 0 || !o.Report.Solved {
				continue
			}
			if err := put(t, id); err != nil {
				return nil, err
			}
		}
	}
	dirTasks, err := LoadDirs(su.Dirs)
	if err != nil {
		return nil, engine.Permanent(fmt.Errorf("eval suite %s: %w", name, err))
	}
	for _, dt := range dirTasks {
		if err := put(dt.Task, dt.ID); err != nil {
			return nil, err
		}
	}
	if len(tasks) == 0 {
		return nil, engine.Permanent(fmt.Errorf("eval suite %s has no usable task", name))
	}
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].ID < tasks[j].ID })
	s.suites[run+"/"+name] = tasks
	return tasks, nil
}

// settle completes every evaluation of run whose attempts all have an
// outcome.
func (s *stage) settle(ctx context.Context, run string, out engine.Emitter) error {
	keys := make([]key, 0)
	for k, f := range s.folds {
		if k.run == run && !f.done && f.requested > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].suite+fmt.Sprint(keys[i].version) < keys[j].suite+fmt.Sprint(keys[j].version)
	})
	for _, k := range keys {
		f := s.folds[k]
		scored := 0
		for _, a := range f.attempts {
			if a.score != nil {
				scored++
			}
		}
		if scored+f.failed < f.requested {
			continue
		}
		tasks, err := s.materialise(ctx, run, k.suite)
		if err != nil {
			return err
		}
		if err := s.complete(ctx, k, f, tasks, out); err != nil {
			return err
		}
	}
	return nil
}

func (s *stage) complete(ctx context.Context, k key, f *fold, tasks []Task, out engine.Emitter) error {
	meta := map[string]Task{}
	for _, t := range tasks {
		meta[t.ID] = t
	}
	ids := make([]string, 0, len(f.attempts))
	for id := range f.attempts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var rows []schemas.EvalResultRow
	p := schemas.EvalCompletedPayload{Suite: k.suite, PolicyVersion: k.version, ByDifficulty: map[string]schemas.Breakdown{}, ByCategory: map[string]schemas.Breakdown{}}
	seenTask := map[string]bool{}
	var solved, credit, turns float64
	add := func(m map[string]schemas.Breakdown, name string, ok bool, c float64) {
		b := m[name]
		n := float64(b.Attempts)
		b.ResolveRate = (b.ResolveRate*n + b2f(ok)) / (n + 1)
		b.MeanReward = (b.MeanReward*n + c) / (n + 1)
		b.Attempts++
		m[name] = b
	}
	for _, id := range ids {
		a := f.attempts[id]
		if a.score == nil {
			continue
		}
		sc := a.score
		ok := sc.Solved()
		c := 0.0
		switch {
		case sc.Total > 0:
			c = float64(sc.Passed) / float64(sc.Total)
		case ok:
			c = 1
		}
		t := meta[a.task]
		rows = append(rows, schemas.EvalResultRow{Run: k.run, Suite: k.suite, TaskID: a.task, Attempt: int32(a.n), PolicyVersion: k.version,
			Reward: sc.Reward, Passed: int32(sc.Passed), Total: int32(sc.Total), Solved: ok, Turns: int32(a.turns),
			Difficulty: t.Difficulty, Category: t.Category, Iteration: int32(f.iteration)})
		seenTask[a.task] = true
		p.Attempts++
		solved += b2f(ok)
		credit += c
		turns += float64(a.turns)
		add(p.ByDifficulty, t.Difficulty, ok, c)
		add(p.ByCategory, t.Category, ok, c)
	}
	p.Tasks = len(seenTask)
	p.Unscored = f.failed
	if p.Attempts > 0 {
		n := float64(p.Attempts)
		p.ResolveRate, p.MeanReward, p.MeanTurns = solved/n, credit/n, turns/n
		ref, err := schemas.WriteTable(ctx, s.cfg.Store, k.run, f.iteration, rows, schemas.WriterOptions{TempDir: s.cfg.TempDir})
		if err != nil {
			return err
		}
		p.Results = []schemas.FileRef{ref}
	}
	_, err := out.Emit(schemas.EvalCompleted, p, engine.AsDecision(fmt.Sprintf("%s/v%d", k.suite, k.version)))
	return err
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
