package control

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/lineage"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
)

// Config is the shape of a run: its settings and what control takes from
// the other stages' settings.
type Config struct {
	Settings
	// EvalSuite names the suite (empty: no evaluation); EvalAttempts is
	// attempts per task.
	EvalSuite    string
	EvalAttempts int
	// Model is the policy's shape, for batch manifests.
	Model schemas.ModelDims
	// MaxSimilarity drops, at sealing, a task more similar than this to an
	// accepted task of a smaller id (0: no de-duplication).
	MaxSimilarity float64
	// MaxStaleness (training.max_staleness) lets iteration i sample while
	// the updates of up to MaxStaleness iterations before it run: it
	// samples the policy iteration i−1−MaxStaleness made, and trains the
	// newest. 0 is the synchronous recipe.
	MaxStaleness int
}

// StageConfig wires the stage.
type StageConfig struct {
	Log    *engine.Log
	Store  store.ObjectStore
	Config Config
}

// NewStage returns the control stage. It decides from a fold that one
// handler at a time updates, so it is engine.Serial: its runner handles
// one event at a time.
func NewStage(cfg StageConfig) engine.Stage {
	s := &stage{cfg: cfg, runs: map[string]*runState{}, loaded: map[string]bool{}, seen: map[string]bool{}}
	return serial{engine.NewStage("control", Consumes(), s.handle)}
}

type serial struct{ engine.Stage }

func (serial) Serial() bool { return true }

// Consumes lists what control folds.
func Consumes() []string {
	types := []string{
		schemas.RunStarted, schemas.SynthRequested, schemas.SynthCandidate, schemas.SynthDiscarded, schemas.TaskSynthesized,
		schemas.TaskAudited, schemas.PoolSealed, schemas.RolloutRequested, schemas.RolloutCompleted,
		schemas.RewardScored, schemas.BatchReady, schemas.PolicyUpdated, schemas.EvalRequested,
		schemas.EvalCompleted, schemas.RunCompleted, schemas.RunFailed, schemas.SFTRequested, schemas.SFTCompleted,
	}
	for _, t := range []string{schemas.SynthRequested, schemas.SynthCandidate, schemas.TaskSynthesized, schemas.RolloutRequested,
		schemas.RolloutCompleted, schemas.BatchReady, schemas.CriticUpdated, schemas.EvalRequested, schemas.SFTRequested} {
		types = append(types, engine.FailedType(t))
	}
	return types
}

type stage struct {
	cfg    StageConfig
	mu     sync.Mutex
	runs   map[string]*runState
	loaded map[string]bool // runs folded from the log
	seen   map[string]bool
}

func (s *stage) run(id string) *runState {
	if s.runs[id] == nil {
		s.runs[id] = newRunState(id)
	}
	return s.runs[id]
}

// load folds run's events as the log holds them, the first time the run
// is met: the state a restarted control continues from. It reads the
// run's own events of the types control consumes and no other run's, but
// for a continued branch, which first takes over what its parent did
// before the branch point (History).
func (s *stage) load(ctx context.Context, run string) error {
	if s.loaded[run] {
		return nil
	}
	st := s.run(run)
	err := lineage.History(ctx, s.cfg.Log, run, Consumes(), func(ev engine.Event) error {
		if k := seenKey(run, ev.ID); !s.seen[k] {
			s.seen[k] = true
			st.apply(ev)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("control: fold run %s: %w", run, err)
	}
	s.loaded[run] = true
	return nil
}

func (s *stage) handle(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.load(ctx, ev.Run); err != nil {
		return err
	}
	if k := seenKey(ev.Run, ev.ID); !s.seen[k] {
		s.seen[k] = true
		s.run(ev.Run).apply(ev)
	}
	return s.decide(ctx, ev.Run, s.run(ev.Run), out)
}

// seenKey is an event folded into run's state: a branch folds its parent's
// events too, which the parent's own state must still fold.
func seenKey(run, id string) string { return run + "/" + id }

func seedFor(seed uint64, parts ...any) uint64 {
	h := fnv.New64a()
	fmt.Fprint(h, seed)
	for _, p := range parts {
		fmt.Fprint(h, "/", p)
	}
	return h.Sum64()
}

// decide emits whatever the state of run calls for. Every decision is
// keyed, so deciding twice is harmless.
func (s *stage) decide(ctx context.Context, run string, st *runState, out engine.Emitter) error {
	c := s.config(st)
	if !st.started || st.finished {
		return nil
	}
	// A branch that only replayed a stage decides nothing, unless the
	// stage it replays is control's own.
	if st.branch != nil && !st.branch.Continue && st.branch.Stage != "control" {
		return nil
	}
	// Synthesis rounds.
	if !st.sealed {
		r0 := st.round(0)
		if !r0.requested {
			return emit(out, schemas.SynthRequested, "round-0", schemas.SynthRequestedPayload{Round: 0, Seeds: c.Seeds, Seed: s.poolSeed(st)})
		}
		last, total := 0, 0
		for r := 0; r < c.Rounds; r++ {
			rd := st.round(r)
			if !rd.requested {
				break
			}
			last = r
			total += len(rd.accepted)
			if !rd.isSettled() {
				return nil
			}
		}
		cur := st.round(last)
		if total < c.PoolTarget && last+1 < c.Rounds && len(cur.accepted) > 0 {
			return emit(out, schemas.SynthRequested, fmt.Sprintf("round-%d", last+1), schemas.SynthRequestedPayload{
				Round: last + 1, SeedIDs: cur.accepted, PerSeed: c.PerSeed, Seed: s.poolSeed(st),
			})
		}
		return s.seal(ctx, run, st, out)
	}
	if err := s.compact(ctx, run, st, "round", roundTables, c.Rounds); err != nil {
		return err
	}
	// Supervised initialisation.
	base := int64(0)
	if c.SFTSteps > 0 {
		if done, err := s.sft(st, out); err != nil || !done {
			return err
		}
		base = st.sftVersion
		// The fine-tuned policy is the middle row of base → SFT → RL.
		if base > 0 && c.EvalBaseline {
			if asked, err := s.maybeEval(st, base, 0, true, out); err != nil || asked {
				return err
			}
		}
	}
	// Training iterations. Iteration i samples the policy iteration
	// i−1−MaxStaleness made (base before any) and starts as soon as that
	// exists, while the iterations between still play or train; its batch
	// goes to the critic only once iteration i−1's update is done, so it
	// trains the newest policy, exactly MaxStaleness versions after the
	// one that sampled it. The schedule depends on the log alone, never on
	// which attempt finished first, so a resumed or replayed run makes the
	// same decisions.
	pending := false // an iteration before i has not been updated
	for i := 0; i < c.Iterations; i++ {
		it := st.iter(i)
		if !it.started {
			version, ok := st.sampleVersion(i, base, c.MaxStaleness)
			if !ok {
				return nil
			}
			return s.startIteration(st, i, version, out)
		}
		it.expected = len(s.tasksFor(st, i)) * c.Attempts
		if it.inherited > 0 {
			// Taken over whole (a cut never splits an iteration's
			// requests): the branch's own tasks_per_iteration or attempts
			// count from its next iteration on.
			it.expected = it.inherited
		}
		if pending {
			continue
		}
		if !it.isSettled() {
			pending = true
			continue
		}
		if !it.batch {
			return s.batch(ctx, run, st, i, base, out)
		}
		if it.batchFail {
			return emit(out, schemas.RunFailed, "failed", schemas.RunCompletedPayload{Iterations: i, Reason: fmt.Sprintf("iteration %d: the critic or the update failed", i)})
		}
		if !it.updated {
			pending = true
			continue
		}
		if asked, err := s.maybeEval(st, it.newVer, i+1, i == c.Iterations-1, out); err != nil || asked {
			return err // an evaluation just asked for is not folded yet
		}
		if !evaluating(st, i) {
			if err := s.compactIteration(ctx, run, st, i); err != nil {
				return err
			}
		}
	}
	if pending {
		return nil
	}
	// Done when every requested evaluation, the last policy's included,
	// has an outcome.
	for _, state := range st.evals {
		if state == "requested" {
			return nil
		}
	}
	if last := st.iter(c.Iterations - 1); c.EvalSuite != "" && st.evals[last.newVer] == "" {
		return nil
	}
	last := st.iter(c.Iterations - 1)
	// The last policy's evaluation is its iteration's only rows.
	if err := s.compactIteration(ctx, run, st, c.Iterations); err != nil {
		return err
	}
	return emit(out, schemas.RunCompleted, "completed", schemas.RunCompletedPayload{Iterations: c.Iterations, PolicyVersion: last.newVer, PoolTasks: len(st.pool)})
}

// config is the configuration st's run follows: a branch trains what its
// run.started froze, its iterations and model shape.
func (s *stage) config(st *runState) Config {
	c := s.cfg.Config
	if st.branch != nil {
		if st.iterations > 0 {
			c.Iterations = st.iterations
		}
		c.Model = st.model
	}
	return c
}

func emit(out engine.Emitter, typ, key string, payload any) error {
	_, err := out.Emit(typ, payload, engine.AsDecision(key))
	return err
}

// seal freezes the pool: every accepted task, with its category
// histogram read from the tasks table.
func (s *stage) seal(ctx context.Context, run string, st *runState, out engine.Emitter) error {
	var ids []string
	for r := 0; r < s.cfg.Config.Rounds; r++ {
		ids = append(ids, st.round(r).accepted...)
	}
	sort.Strings(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return emit(out, schemas.RunFailed, "failed", schemas.RunCompletedPayload{Reason: "synthesis produced no accepted task"})
	}
	if s.cfg.Config.MaxSimilarity > 0 {
		kept, err := s.dedup(ctx, run, st, ids)
		if err != nil {
			return err
		}
		st.excluded = len(ids) - len(kept)
		ids = kept
	}
	p := schemas.PoolSealedPayload{PoolVersion: 1, Tasks: len(ids), Categories: map[string]int{}, TaskIDs: ids, Excluded: st.excluded}
	for _, id := range ids {
		ref, ok := st.taskRef[id]
		if !ok {
			continue
		}
		p.Pool = append(p.Pool, ref)
		rows, err := schemas.ReadRows[schemas.TaskRow](ctx, s.cfg.Store, ref.Key, &ref)
		if err != nil {
			return err
		}
		for _, row := range rows {
			p.Categories[row.Category]++
		}
	}
	if err := emit(out, schemas.PoolSealed, "pool-1", p); err != nil {
		return err
	}
	if s.cfg.Config.EvalBaseline && s.cfg.Config.EvalSuite != "" {
		return emit(out, schemas.EvalRequested, "eval-v0", s.evalRequest(0, 0))
	}
	return nil
}

// dedup keeps, of ids in order, each task not more similar than
// MaxSimilarity to one kept before it.
func (s *stage) dedup(ctx context.Context, run string, st *runState, ids []string) ([]string, error) {
	fps := make([]harbor.Fingerprint, len(ids))
	for i, id := range ids {
		ref := st.taskBundle[id]
		if ref.Key == "" {
			ref.Key = keys.Bundle(run, id)
		}
		rc, _, err := s.cfg.Store.Get(ctx, ref.Key)
		if err != nil {
			return nil, fmt.Errorf("pool: bundle of %s: %w", id, err)
		}
		// Read it whole first: a connection cut mid-body is the store's
		// fault and retried; only a bundle that arrived is judged.
		data, err := io.ReadAll(io.LimitReader(rc, 2*harbor.DefaultLimits.MaxTotalBytes))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("pool: bundle of %s: %w", id, err)
		}
		t, err := harbor.ReadBundle(bytes.NewReader(data), id, harbor.DefaultLimits)
		if err != nil {
			return nil, engine.Permanent(fmt.Errorf("pool: %w", err))
		}
		fps[i] = harbor.FingerprintOf(t)
	}
	var kept []string
	for i, keep := range harbor.Dedup(fps, s.cfg.Config.MaxSimilarity) {
		if keep {
			kept = append(kept, ids[i])
		}
	}
	return kept, nil
}

// sft plays one demonstration per pool task and waits for each to be
// scored, then asks for fine-tuning on the tokens of those that solved
// their task; done reports that the fine-tuned policy (or, when it
// failed, the initial one) is ready. Waiting for the scores keeps the
// run from completing with a demonstration's reward still outstanding,
// and a demonstration its verifier fails would teach the wrong commands.
func (s *stage) sft(st *runState, out engine.Emitter) (done bool, err error) {
	switch {
	case st.sftDone:
		return true, nil
	case st.sftAsked:
		return false, nil
	case st.sftRequested == 0:
		for _, task := range s.split(st).sft {
			p := schemas.RolloutRequestedPayload{TaskID: task, Purpose: "sft", Seed: seedFor(s.poolSeed(st), "sft", task),
				MaxTurns: 200, Bundle: st.taskBundle[task]}
			if err := emit(out, schemas.RolloutRequested, "sft/"+task, p); err != nil {
				return false, err
			}
		}
		return false, nil
	case len(st.sftSolved)+st.sftFailed < len(s.split(st).sft):
		return false, nil
	}
	var tasks []string
	unsolved := 0
	for task, solved := range st.sftSolved {
		if solved {
			tasks = append(tasks, task)
		} else {
			unsolved++
		}
	}
	sort.Strings(tasks)
	data := make([]schemas.FileRef, len(tasks))
	for i, task := range tasks {
		data[i] = st.sftData[task]
	}
	if len(data) == 0 {
		st.sftDone = true // nothing to learn from: go on from the initial policy
		return true, nil
	}
	req := schemas.SFTRequestedPayload{PolicyVersion: 0, Data: data, Epochs: s.cfg.Config.SFTSteps, Unsolved: unsolved}
	if s.cfg.Config.SFTShuffle {
		req.Seed = st.seed
	}
	return false, emit(out, schemas.SFTRequested, "sft", req)
}

// poolSeed is the seed of the run's dataset: the pool, its split and
// its demonstrations (Settings.PoolSeed, else the run seed).
func (s *stage) poolSeed(st *runState) uint64 {
	if s.cfg.Config.PoolSeed != 0 {
		return s.cfg.Config.PoolSeed
	}
	return st.seed
}

// poolSplit is which pool tasks are demonstrated for fine-tuning and
// which the iterations sample, each in pool order.
type poolSplit struct{ sft, rl []string }

// split divides the sealed pool: with fine-tuning on and RLTasks above 0,
// a seeded draw of RLTasks tasks goes to the iterations alone and the
// rest to the demonstrations; otherwise both get the whole pool. It is a
// function of the pool seed and the pool, so a restarted control or a
// branch divides the same way.
func (s *stage) split(st *runState) poolSplit {
	if st.split != nil {
		return *st.split
	}
	c := s.cfg.Config
	sp := poolSplit{sft: st.pool, rl: st.pool}
	if n := min(c.RLTasks, len(st.pool)-1); c.SFTSteps > 0 && n > 0 {
		held := map[string]bool{}
		ps := s.poolSeed(st)
		for _, k := range seededSample(ps, seedFor(ps, "rl-tasks"), len(st.pool), n) {
			held[st.pool[k]] = true
		}
		sp = poolSplit{}
		for _, task := range st.pool {
			if held[task] {
				sp.rl = append(sp.rl, task)
			} else {
				sp.sft = append(sp.sft, task)
			}
		}
	}
	if st.sealed {
		st.split = &sp
	}
	return sp
}

// tasksFor is iteration i's sample of the tasks the iterations train on.
// With SkipUniform or FreshTasks, the sample is drawn from tiers in turn,
// each topped up from the next when it holds too few: with FreshTasks,
// tasks no iteration has drawn first; then, with SkipUniform, tasks not
// known to be uniform (uniformTasks); then the rest.
func (s *stage) tasksFor(st *runState, i int) []string {
	tasks := s.split(st).rl
	c := s.cfg.Config
	n := c.TasksPerIteration
	if n <= 0 || n >= len(tasks) {
		return tasks
	}
	pick := func(from []string, n int, stream ...any) []string {
		out := make([]string, n)
		for j, k := range seededSample(st.seed, seedFor(st.seed, stream...), len(from), n) {
			out[j] = from[k]
		}
		return out
	}
	if !(c.SkipUniform || c.FreshTasks) || i == 0 {
		return pick(tasks, n, "iteration", i)
	}
	// Only the iterations up to i−1−MaxStaleness are judged: those are
	// complete when i starts, while the ones after may still be playing,
	// and what they have scored so far is wall-clock luck.
	judged := i - c.MaxStaleness
	uniform, drawn := map[string]bool{}, map[string]bool{}
	if c.SkipUniform {
		uniform = uniformTasks(st, judged)
	}
	if c.FreshTasks {
		drawn = drawnTasks(st, judged)
	}
	// The first tier draws on the stream a plain iteration draws on;
	// SkipUniform's two tiers keep the streams they had before FreshTasks.
	tiers := []struct {
		stream string
		tasks  []string
	}{{stream: "iteration"}, {stream: "iteration-drawn"}, {stream: "iteration-uniform"}}
	for _, t := range tasks {
		switch {
		case uniform[t]:
			tiers[2].tasks = append(tiers[2].tasks, t)
		case drawn[t]:
			tiers[1].tasks = append(tiers[1].tasks, t)
		default:
			tiers[0].tasks = append(tiers[0].tasks, t)
		}
	}
	var out []string
	for _, tier := range tiers {
		left := n - len(out)
		if left <= 0 {
			break
		}
		if len(tier.tasks) <= left {
			out = append(out, tier.tasks...)
		} else {
			out = append(out, pick(tier.tasks, left, tier.stream, i)...)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return slices.Index(tasks, a) - slices.Index(tasks, b) })
	return out
}

// drawnTasks is the set of tasks an iteration before i trained on.
// Negative i judges none.
func drawnTasks(st *runState, i int) map[string]bool {
	drawn := map[string]bool{}
	for j := 0; j < i; j++ {
		for _, sc := range st.iter(j).scored {
			drawn[sc.TaskID] = true
		}
		for _, c := range st.iter(j).completed {
			drawn[c.TaskID] = true
		}
	}
	return drawn
}

// uniformTasks is the set of tasks whose attempts in the latest of the
// iterations before i that drew them all earned the same reward. Under
// the group baseline such a group has no advantage, so training on it
// again teaches nothing unless the policy has since moved; a task drawn
// with fewer than two scored attempts is not judged. The iterations
// before i are complete when i is sampled, so a restarted control folds
// the same rewards and draws the same tasks.
func uniformTasks(st *runState, i int) map[string]bool {
	uniform := map[string]bool{}
	for j := 0; j < i; j++ {
		rewards := map[string][]float64{}
		for _, sc := range st.iter(j).scored {
			rewards[sc.TaskID] = append(rewards[sc.TaskID], sc.Reward)
		}
		for task, r := range rewards {
			if len(r) < 2 {
				continue
			}
			uniform[task] = slices.Min(r) == slices.Max(r)
		}
	}
	return uniform
}

// seededSample is n of the indices [0, size), drawn by the stream (a, b),
// in increasing order.
func seededSample(a, b uint64, size, n int) []int {
	idx := rand.New(rand.NewPCG(a, b)).Perm(size)[:n]
	sort.Ints(idx)
	return idx
}

func (s *stage) startIteration(st *runState, i int, version int64, out engine.Emitter) error {
	c := s.cfg.Config
	// One pool per run so far: sealing happens once, as version 1.
	if err := emit(out, schemas.IterationStarted, fmt.Sprintf("iter-%d", i), schemas.IterationStartedPayload{Iteration: i, PolicyVersion: version, PoolVersion: 1}); err != nil {
		return err
	}
	for _, task := range s.tasksFor(st, i) {
		for a := range c.Attempts {
			p := schemas.RolloutRequestedPayload{
				TaskID: task, Attempt: a, Purpose: "train", Iteration: i, PolicyVersion: version,
				Seed: seedFor(st.seed, "rollout", i, task, a), MaxTurns: c.MaxTurns, Bundle: st.taskBundle[task],
			}
			if err := emit(out, schemas.RolloutRequested, fmt.Sprintf("iter-%d/%s/%d", i, task, a), p); err != nil {
				return err
			}
		}
	}
	return nil
}

// batch writes iteration i's manifest from the attempts that were scored.
func (s *stage) batch(ctx context.Context, run string, st *runState, i int, base int64, out engine.Emitter) error {
	c := s.config(st)
	it := st.iter(i)
	trains := base // the policy this batch trains: the newest
	if i > 0 {
		trains = st.iter(i - 1).newVer
	}
	if float64(len(it.scored)) < c.MinSuccess*float64(it.expected) {
		return emit(out, schemas.RunFailed, "failed", schemas.RunCompletedPayload{Iterations: i,
			Reason: fmt.Sprintf("iteration %d: %d of %d attempts scored, below %.0f%%", i, len(it.scored), it.expected, 100*c.MinSuccess)})
	}
	m := &schemas.BatchManifest{
		Format: schemas.ManifestFormat, Run: run, Iteration: i, PolicyVersion: it.version, Staleness: trains - it.version, Model: c.Model,
		RoutingEncoding: routing.Packed.String(), RoutingDType: routing.DType(c.Model.Experts), SchemaVersions: map[string]string{},
	}
	keys := make([]string, 0, len(it.scored))
	for k := range it.scored {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var tokens int64
	for _, k := range keys {
		done, ok := it.completed[k]
		if !ok || done.RoutingRows.Key == "" {
			continue // no routing (a scripted policy): not trainable
		}
		sc := it.scored[k]
		m.TokenFiles = append(m.TokenFiles, done.TokenRows)
		m.RoutingFiles = append(m.RoutingFiles, done.RoutingRows)
		m.TrajectoryFiles = append(m.TrajectoryFiles, done.Trajectory)
		m.RewardFiles = append(m.RewardFiles, sc.Rewards)
		m.Chunks += done.TokenRows.Rows
		m.Attempts++
		tokens += done.Tokens
		for _, f := range []schemas.FileRef{done.TokenRows, done.RoutingRows, done.Trajectory, sc.Rewards} {
			m.SchemaVersions[f.Table] = f.SchemaVersion
		}
	}
	m.Tokens = tokens
	if m.Attempts == 0 {
		return emit(out, schemas.RunFailed, "failed", schemas.RunCompletedPayload{Iterations: i, Reason: fmt.Sprintf("iteration %d: no scored attempt has routing to train on", i)})
	}
	if err := m.Validate(); err != nil {
		return engine.Permanent(fmt.Errorf("iteration %d: %w", i, err))
	}
	// A store that does not answer is retried; it must not fail the batch.
	ref, err := schemas.WriteManifest(ctx, s.cfg.Store, m)
	if err != nil {
		return fmt.Errorf("iteration %d: %w", i, err)
	}
	return emit(out, schemas.BatchReady, fmt.Sprintf("batch-%d", i), schemas.BatchReadyPayload{
		Iteration: i, PolicyVersion: it.version, Attempts: int(m.Attempts), Tokens: tokens, Manifest: ref,
	})
}

// roundTables are partitioned by synthesis round, iterTables by iteration.
var (
	roundTables = []schemas.Table{schemas.TasksTable, schemas.AuditsTable}
	iterTables  = []schemas.Table{schemas.TrajectoriesTable, schemas.TurnsTable, schemas.TokensTable, schemas.RoutingTable,
		schemas.RewardsTable, schemas.ValuesTable, schemas.MetricsTable, schemas.EvalResultsTable}
)

// evaluating reports whether an evaluation that writes into partition i
// or one before is still running: iteration i's partition is compacted
// only once none is.
func evaluating(st *runState, i int) bool {
	for v, state := range st.evals {
		if state == "requested" && st.evalIter[v] <= i {
			return true
		}
	}
	return false
}

// compactIteration compacts iteration i's partitions: called once the
// iteration is sealed (its update made the next policy and the
// evaluations stored under it have their outcome), when nothing writes to
// them any more.
func (s *stage) compactIteration(ctx context.Context, run string, st *runState, i int) error {
	return s.compact(ctx, run, st, "iter", iterTables, i, i+1)
}

// compact compacts partitions [from, to) of tables, or, with one bound
// alone, [0, from), each once per process (schemas.Compact).
func (s *stage) compact(ctx context.Context, run string, st *runState, dir string, tables []schemas.Table, from int, to ...int) error {
	if s.cfg.Store == nil {
		return nil // the fold's own tests decide without a store
	}
	lo, hi := 0, from
	if len(to) > 0 {
		lo, hi = from, to[0]
	}
	if st.compacted == nil {
		st.compacted = map[string]bool{}
	}
	for p := lo; p < hi; p++ {
		name := fmt.Sprintf("%s-%04d", dir, p)
		if st.compacted[name] {
			continue
		}
		for _, t := range tables {
			if _, err := schemas.Compact(ctx, s.cfg.Store, run, t, p, schemas.WriterOptions{}); err != nil {
				return fmt.Errorf("%s %s: %w", t.Name, name, err)
			}
		}
		st.compacted[name] = true
	}
	return nil
}

func (s *stage) evalRequest(version int64, iteration int) schemas.EvalRequestedPayload {
	c := s.cfg.Config
	return schemas.EvalRequestedPayload{Suite: c.EvalSuite, PolicyVersion: version, Iteration: iteration, Attempts: c.EvalAttempts}
}

// maybeEval asks for an evaluation of version when the schedule says so,
// and reports whether it did.
func (s *stage) maybeEval(st *runState, version int64, iteration int, last bool, out engine.Emitter) (bool, error) {
	c := s.cfg.Config
	due := last || (c.EvalEvery > 0 && version%int64(c.EvalEvery) == 0)
	if !due || c.EvalSuite == "" || st.evals[version] != "" {
		return false, nil
	}
	return true, emit(out, schemas.EvalRequested, fmt.Sprintf("eval-v%d", version), s.evalRequest(version, iteration))
}
