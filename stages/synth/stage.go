package synth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trial"
)

// Config wires the stage.
type Config struct {
	Store store.ObjectStore
	Trial trial.Options
	// StepsPerRound is how many steps that do work a child adds to its
	// parent (default 2).
	StepsPerRound int
	// TempDir holds task directories while they execute.
	TempDir string
	// Generator grows tasks from accepted seeds: Builtin (the default,
	// taskgen's typed steps) or LLM, which needs LLM. Round 0's fresh
	// tasks always come from taskgen: the llm generator extends a parent.
	Generator string
	LLM       *LLMConfig
	// Library is the step library of round 0's tasks (default Basic).
	Library taskgen.Library
	// Candidates is how many tasks the builtin generator draws for each
	// one it emits, keeping the one whose values the round covers least
	// (taskgen.Coverage); 1 emits every draw as it is.
	Candidates int
	// Avoid, when set, are the tasks (the held-out suite's) a candidate
	// may not be more similar to than MaxSimilarity: choose passes over
	// such candidates while any other is left (Settings.AvoidEval).
	Avoid         []harbor.Reference
	MaxSimilarity float64
}

// New returns the synth stage.
func New(cfg Config) engine.Stage {
	if cfg.StepsPerRound <= 0 {
		cfg.StepsPerRound = 2
	}
	if cfg.Library == "" {
		cfg.Library = taskgen.Basic
	}
	if cfg.Candidates <= 0 {
		cfg.Candidates = 1
	}
	s := &stage{cfg: cfg}
	return engine.NewStage("synth", []string{schemas.SynthRequested, schemas.SynthCandidate}, s.handle)
}

type stage struct{ cfg Config }

func (s *stage) handle(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	switch ev.Type {
	case schemas.SynthRequested:
		return s.fanOut(ctx, ev, out)
	case schemas.SynthCandidate:
		return s.candidate(ctx, ev, out)
	}
	return engine.Permanent(fmt.Errorf("synth: unexpected event type %s", ev.Type))
}

// rngFor seeds a generator from the run's seed and a name, so a rerun and
// a replay with the same seed grow the same tasks.
func rngFor(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

func (s *stage) fanOut(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	var p schemas.SynthRequestedPayload
	if err := ev.Decode(&p); err != nil {
		return err
	}
	if p.Round < 0 || p.Seeds < 0 || p.PerSeed < 0 || p.Seeds > 100000 || p.PerSeed > 1000 {
		return engine.Permanent(fmt.Errorf("synth.requested: round %d, seeds %d, per_seed %d out of range", p.Round, p.Seeds, p.PerSeed))
	}
	// One coverage per fan-out, so a replay of the event chooses the same.
	cov := taskgen.NewCoverage()
	if len(p.SeedIDs) == 0 {
		for i := range p.Seeds {
			name := fmt.Sprintf("round-%d/seed-%d", p.Round, i)
			refs, err := s.choose(cov, name, 0, func(rng *rand.Rand) ([]taskgen.StepRef, error) { return taskgen.Seed(s.cfg.Library, rng), nil }, p.Seed)
			if err != nil {
				return engine.Permanent(err)
			}
			if _, err := out.Emit(schemas.SynthCandidate, schemas.SynthCandidatePayload{Round: p.Round, Steps: refs}, engine.WithKey(fmt.Sprint(i))); err != nil {
				return err
			}
		}
		return nil
	}
	lins := make([]*Lineage, len(p.SeedIDs))
	for i, id := range p.SeedIDs {
		lin, err := s.lineage(ctx, ev.Run, id)
		if err != nil {
			return err
		}
		lins[i] = lin
		if s.cfg.Generator != LLM && lin.Generator != LLM {
			if sp, err := taskgen.Build(lin.Steps); err == nil {
				cov.Add(sp)
			}
		}
	}
	for i, id := range p.SeedIDs {
		lin := lins[i]
		if s.cfg.Generator == LLM {
			root := lin.RootID
			if root == "" {
				root = id
			}
			for k := range p.PerSeed {
				c := schemas.SynthCandidatePayload{Round: p.Round, ParentID: id, RootID: root, Generator: LLM, Seed: p.Seed}
				if _, err := out.Emit(schemas.SynthCandidate, c, engine.WithKey(id+"/"+fmt.Sprint(k))); err != nil {
					return err
				}
			}
			continue
		}
		if lin.Generator == LLM {
			return engine.Permanent(fmt.Errorf("seed %s was grown by the llm generator: it has no steps for the built-in one to extend", id))
		}
		// A parent grows in the configured library when it is one of its
		// tasks (one of shared basic steps is in both basic libraries),
		// else in its own.
		lib := s.cfg.Library
		if !taskgen.InLibrary(lib, lin.Steps) {
			lib = taskgen.LibraryOf(lin.Steps)
		}
		for k := range p.PerSeed {
			name := fmt.Sprintf("round-%d/%s/%d", p.Round, id, k)
			refs, err := s.choose(cov, name, len(lin.Steps), func(rng *rand.Rand) ([]taskgen.StepRef, error) {
				return taskgen.Extend(lib, lin.Steps, s.cfg.StepsPerRound, rng)
			}, p.Seed)
			if err != nil {
				return engine.Permanent(fmt.Errorf("seed %s: %w", id, err))
			}
			c := schemas.SynthCandidatePayload{Round: p.Round, ParentID: id, RootID: lin.RootID, Steps: refs, ParentSteps: len(lin.Steps)}
			if _, err := out.Emit(schemas.SynthCandidate, c, engine.WithKey(id+"/"+fmt.Sprint(k))); err != nil {
				return err
			}
		}
	}
	return nil
}

// choose draws a task from the stream name (as a single candidate always
// did) and Candidates-1 others with the same steps and the values of
// the steps from index from on drawn again (from name/k), and keeps the
// one that adds most to cov.
func (s *stage) choose(cov *taskgen.Coverage, name string, from int, draw func(*rand.Rand) ([]taskgen.StepRef, error), seed uint64) ([]taskgen.StepRef, error) {
	first, err := draw(rngFor(seed, name))
	if err != nil {
		return nil, err
	}
	if _, err := taskgen.Build(first); err != nil || s.cfg.Candidates == 1 {
		return first, nil // the candidate's own handler judges it, as it always did
	}
	cands := [][]taskgen.StepRef{first}
	for k := 1; k < s.cfg.Candidates; k++ {
		cands = append(cands, taskgen.Revalue(first, from, rngFor(seed, fmt.Sprintf("%s/%d", name, k))))
	}
	if apart := slices.DeleteFunc(slices.Clone(cands), s.nearEval); len(apart) > 0 {
		cands = apart
	}
	return cov.Choose(cands)
}

// nearEval reports whether audit would exclude refs' task as a
// near-duplicate of a task in Avoid.
func (s *stage) nearEval(refs []taskgen.StepRef) bool {
	if len(s.cfg.Avoid) == 0 {
		return false
	}
	sp, err := taskgen.Build(refs)
	if err != nil {
		return false
	}
	t, err := sp.Task(0)
	if err != nil {
		return false
	}
	sim, _ := harbor.Nearest(harbor.FingerprintOf(t), s.cfg.Avoid)
	return sim > s.cfg.MaxSimilarity
}

func (s *stage) lineage(ctx context.Context, run, id string) (*Lineage, error) {
	rc, _, err := s.cfg.Store.Get(ctx, keys.Lineage(run, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, engine.Permanent(fmt.Errorf("seed task %s has no lineage at %s", id, keys.Lineage(run, id)))
	}
	if err != nil {
		return nil, err
	}
	// Read it whole first: a connection cut mid-body is the store's fault
	// and retried; only a lineage that arrived is judged.
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("lineage of %s: %w", id, err)
	}
	return parseLineage(id, data)
}

func parseLineage(id string, data []byte) (*Lineage, error) {
	var lin Lineage
	if err := json.Unmarshal(data, &lin); err != nil {
		return nil, engine.Permanent(fmt.Errorf("lineage of %s: %w", id, err))
	}
	return &lin, nil
}

func (s *stage) candidate(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	var p schemas.SynthCandidatePayload
	if err := ev.Decode(&p); err != nil {
		return err
	}
	switch p.Generator {
	case "", Builtin:
	case LLM:
		return s.llmCandidate(ctx, ev, p, out)
	default:
		return engine.Permanent(fmt.Errorf("synth: candidate of unknown generator %q", p.Generator))
	}
	child, err := taskgen.Build(p.Steps)
	if err != nil {
		return engine.Permanent(err)
	}
	var parent *taskgen.Spec
	if p.ParentID != "" {
		if p.ParentSteps <= 0 || p.ParentSteps >= len(p.Steps) {
			return engine.Permanent(fmt.Errorf("candidate %s: parent_steps %d of %d", child.ID(), p.ParentSteps, len(p.Steps)))
		}
		if parent, err = taskgen.Build(p.Steps[:p.ParentSteps]); err != nil {
			return engine.Permanent(fmt.Errorf("parent of %s: %w", child.ID(), err))
		}
		if parent.ID() != p.ParentID {
			return engine.Permanent(fmt.Errorf("candidate %s: its steps do not extend parent %s", child.ID(), p.ParentID))
		}
	}
	id := child.ID()
	t, err := child.Task(p.Round)
	if err != nil {
		return engine.Permanent(fmt.Errorf("task %s: %w", id, err))
	}
	work, releaseWork, err := hostres.MkdirTemp(s.cfg.TempDir, "t1-synth-", "synth scratch")
	if err != nil {
		return err
	}
	defer releaseWork()
	v, err := Execute(ctx, child, parent, t, filepath.Join(work, id), s.cfg.Trial)
	if err != nil {
		return fmt.Errorf("execute %s: %w", id, err)
	}
	if !v.Keep {
		_, err := out.Emit(schemas.SynthDiscarded, schemas.SynthDiscardedPayload{TaskID: id, ParentID: p.ParentID, Round: p.Round, Reason: v.Reason}, engine.WithKey(id))
		return err
	}
	root := p.RootID
	if root == "" {
		root = id
	}
	lin := Lineage{TaskID: id, ParentID: p.ParentID, RootID: root, Round: p.Round, Steps: p.Steps, Generator: Builtin}
	return s.keep(ctx, ev, out, lin, t, child.Category, child.Difficulty, child.Work)
}

// keep stores a task that execution kept — lineage, bundle, tasks row —
// and announces it.
func (s *stage) keep(ctx context.Context, ev engine.Event, out engine.Emitter, lin Lineage, t *harbor.Task, category, difficulty string, steps int) error {
	id := lin.TaskID
	data, _ := json.Marshal(lin)
	stored, mine, err := store.PutOnce(ctx, s.cfg.Store, keys.Lineage(ev.Run, id), data, store.PutOptions{ContentType: "application/json"})
	if err != nil {
		return fmt.Errorf("lineage %s: %w", id, err)
	}
	if !mine {
		// Another delivery kept the task first: its lineage is the task's.
		prev, err := parseLineage(id, stored)
		if err != nil {
			return err
		}
		lin = *prev
	}
	key, sum, size, err := trial.PutBundle(ctx, s.cfg.Store, ev.Run, id, t)
	if err != nil {
		return err
	}
	source := "synth"
	if lin.ParentID == "" {
		source = "seed"
	}
	row := schemas.TaskRow{
		Run: ev.Run, TaskID: id, ParentID: lin.ParentID, RootID: lin.RootID, Round: int32(lin.Round), Source: source,
		Category: category, Difficulty: difficulty, Tags: t.Config.Metadata.Tags,
		Instruction: t.Instruction, Steps: int32(steps), BundleKey: key, BundleSHA: sum, SolutionPassed: true,
	}
	ref, err := schemas.WriteTable(ctx, s.cfg.Store, ev.Run, lin.Round, []schemas.TaskRow{row}, schemas.WriterOptions{TempDir: s.cfg.TempDir})
	if err != nil {
		return err
	}
	_, err = out.Emit(schemas.TaskSynthesized, schemas.TaskSynthesizedPayload{
		TaskID: id, ParentID: lin.ParentID, Round: lin.Round, Steps: steps, Task: ref,
		Bundle: schemas.ObjectRef{Key: key, Bytes: size, SHA256: sum}, Category: category, Difficulty: difficulty,
	}, engine.WithKey(id))
	return err
}
