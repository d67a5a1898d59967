package rollout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

// Policy is one policy version as the harness uses it.
type Policy struct {
	Engine    inference.Engine
	Tokenizer *moe.Tokenizer
	// Experts is the model's expert count, which the routing codec needs.
	Experts int
}

// Policies resolves a run's policy version. Called once per attempt; it
// may cache.
type Policies func(ctx context.Context, run string, version int64) (Policy, error)

// StageConfig wires the rollout stage.
type StageConfig struct {
	Store    store.ObjectStore
	Trial    trial.Options
	Episode  agent.Config
	Policies Policies
	TempDir  string
}

// NewStage returns the rollout stage: rollout.requested → rollout.completed.
func NewStage(cfg StageConfig) engine.Stage {
	s := &stage{cfg: cfg}
	return engine.NewStage("rollout", []string{schemas.RolloutRequested}, s.handle)
}

type stage struct{ cfg StageConfig }

// attemptName identifies an attempt within a run and iteration.
func attemptName(p schemas.RolloutRequestedPayload) string {
	purpose := p.Purpose
	if p.Suite != "" {
		purpose += "-" + p.Suite
	}
	return fmt.Sprintf("iter=%04d/%s/v%d/%s/a%d", p.Iteration, purpose, p.PolicyVersion, p.TaskID, p.Attempt)
}

// MarkerKey is the object written once an attempt's outputs are all
// stored: a redelivered request finds it and announces the same outputs
// again instead of playing a second episode.
func MarkerKey(run string, p schemas.RolloutRequestedPayload) string {
	return "runs/" + run + "/attempts/" + attemptName(p) + ".json"
}

func (s *stage) handle(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	var p schemas.RolloutRequestedPayload
	if err := ev.Decode(&p); err != nil {
		return err
	}
	if p.TaskID == "" || p.Attempt < 0 || p.Iteration < 0 || (p.Purpose != "train" && p.Purpose != "eval" && p.Purpose != "sft") {
		return engine.Permanent(fmt.Errorf("rollout.requested: task %q, attempt %d, iteration %d, purpose %q", p.TaskID, p.Attempt, p.Iteration, p.Purpose))
	}
	key := engine.WithKey(attemptName(p))
	if done, err := s.done(ctx, ev.Run, p); err != nil || done != nil {
		if err != nil {
			return err
		}
		_, err = out.Emit(schemas.RolloutCompleted, done, key)
		return err
	}
	c, err := s.attempt(ctx, ev.Run, p)
	if err != nil {
		return err
	}
	data, _ := json.Marshal(c)
	marker := MarkerKey(ev.Run, p)
	stored, mine, err := store.PutOnce(ctx, s.cfg.Store, marker, data, store.PutOptions{ContentType: "application/json"})
	if err != nil {
		return fmt.Errorf("attempt marker: %w", err)
	}
	if !mine {
		// Another delivery finished first; announce what it stored.
		if c, err = parseMarker(marker, stored); err != nil {
			return err
		}
	}
	_, err = out.Emit(schemas.RolloutCompleted, c, key)
	return err
}

// done returns the outcome an earlier delivery stored in the attempt's
// marker, or nil when there is none.
func (s *stage) done(ctx context.Context, run string, p schemas.RolloutRequestedPayload) (*schemas.RolloutCompletedPayload, error) {
	key := MarkerKey(run, p)
	rc, _, err := s.cfg.Store.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("attempt marker %s: %w", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("attempt marker %s: %w", key, err)
	}
	return parseMarker(key, data)
}

func parseMarker(key string, data []byte) (*schemas.RolloutCompletedPayload, error) {
	var c schemas.RolloutCompletedPayload
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("attempt marker %s: %w", key, err)
	}
	return &c, nil
}

func (s *stage) attempt(ctx context.Context, run string, p schemas.RolloutRequestedPayload) (*schemas.RolloutCompletedPayload, error) {
	start := time.Now()
	work, err := os.MkdirTemp(s.cfg.TempDir, "t1-rollout-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	dir := filepath.Join(work, "task")
	t, bundle, err := trial.Fetch(ctx, s.cfg.Store, run, p.TaskID, p.Bundle, dir)
	if trial.Unusable(err) {
		return nil, engine.Permanent(err)
	}
	if err != nil {
		return nil, err
	}
	pol, err := s.cfg.Policies(ctx, run, p.PolicyVersion)
	if err != nil {
		return nil, fmt.Errorf("policy %d: %w", p.PolicyVersion, err)
	}
	tp, err := moe.NewChat(pol.Tokenizer)
	if err != nil {
		return nil, engine.Permanent(err)
	}
	if s.cfg.Trial.Backend == nil {
		return nil, engine.Permanent(errors.New("rollout: no sandbox backend"))
	}
	sb, err := s.cfg.Trial.Backend.Start(ctx, sandbox.Spec{TaskDir: dir, Limits: s.cfg.Trial.Limits, TempDir: s.cfg.Trial.TempDir})
	if err != nil {
		return nil, fmt.Errorf("sandbox for %s: %w", p.TaskID, err)
	}
	defer sb.Close()
	sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
	if err != nil {
		return nil, fmt.Errorf("shell for %s: %w", p.TaskID, err)
	}
	defer sh.Close()

	ec := s.cfg.Episode
	if p.MaxTurns > 0 {
		ec.MaxTurns = p.MaxTurns
	}
	ec.Sampling.Seed = p.Seed
	if d := t.Config.AgentTimeout(); d > 0 && (ec.WallClock == 0 || d < ec.WallClock) {
		ec.WallClock = d
	}
	policy := pol.Engine
	if p.Purpose == "sft" {
		// A demonstration: the reference solution through the same harness,
		// its tokens the supervised data.
		policy = agent.FromSolution(tp, string(t.Files[harbor.SolutionPath].Data))
	}
	res, err := agent.Run(ctx, policy, tp, sh, t.Instruction, ec, nil)
	if err != nil {
		return nil, err
	}
	c := &schemas.RolloutCompletedPayload{
		TaskID: p.TaskID, Attempt: p.Attempt, Purpose: p.Purpose, Suite: p.Suite, Iteration: p.Iteration,
		PolicyVersion: p.PolicyVersion, Turns: len(res.Turns), Tokens: int64(res.Sampled), Chunks: len(res.Chunks),
		Termination: res.Termination, Bundle: bundle, Sandbox: sb.Info().Backend, Isolated: sb.Info().Isolated,
		Drift: schemas.DriftCounts{
			StrictPrefix: res.Repairs[schemas.RepairStrictPrefix], ClippedNorm: res.Repairs[schemas.RepairClippedNorm],
			TextRetokened: res.Repairs[schemas.RepairTextRetokened], NewChunk: res.Repairs[schemas.RepairNewChunk],
		},
	}
	if res.LossDrift != 0 {
		return nil, engine.Permanent(fmt.Errorf("attempt %s: %d loss-region tokens drifted from the sampler's", attemptName(p), res.LossDrift))
	}
	if c.Snapshot, err = s.snapshot(ctx, run, p, sb); err != nil {
		return nil, err
	}
	if err := s.write(ctx, run, p, res, pol, time.Since(start), c); err != nil {
		return nil, err
	}
	return c, nil
}

func (s *stage) snapshot(ctx context.Context, run string, p schemas.RolloutRequestedPayload, sb sandbox.Sandbox) (schemas.ObjectRef, error) {
	var buf bytes.Buffer
	if err := sb.Snapshot(ctx, &buf); err != nil {
		return schemas.ObjectRef{}, fmt.Errorf("snapshot: %w", err)
	}
	sum := sha256.Sum256(buf.Bytes())
	key := "runs/" + run + "/snapshots/" + attemptName(p) + ".tar"
	// Another delivery of this attempt may have stored its snapshot first.
	// An overwrite would change the bytes under the hash that delivery may
	// already have announced, so the stored one is this attempt's.
	stored, _, err := store.PutOnceSum(ctx, s.cfg.Store, key, &buf, store.Sum{Size: int64(buf.Len()), SHA256: hex.EncodeToString(sum[:])},
		store.PutOptions{ContentType: "application/x-tar"})
	if err != nil {
		return schemas.ObjectRef{}, fmt.Errorf("store snapshot: %w", err)
	}
	return schemas.ObjectRef{Key: key, Bytes: stored.Size, SHA256: stored.SHA256}, nil
}

// Rows are the table rows of one attempt.
type Rows struct {
	Tokens     []schemas.TokenRow
	Routing    []schemas.RoutingRow
	Turns      []schemas.TurnRow
	Trajectory schemas.TrajectoryRow
}

// AttemptRows turns a finished episode into its table rows. experts is the
// model's expert count (for the routing codec).
func AttemptRows(run string, p schemas.RolloutRequestedPayload, res *agent.Result, experts int, snapshotKey string, took time.Duration) (*Rows, error) {
	rows := &Rows{}
	att := int32(p.Attempt)
	for i, ch := range res.Chunks {
		row := schemas.TokenRow{
			Run: run, TaskID: p.TaskID, Attempt: att, Chunk: int32(i), Iteration: int32(p.Iteration), PolicyVersion: p.PolicyVersion,
			TokenIDs: ints32(ch.IDs), LogProbs: ch.LogProbs, LossMask: ch.Loss, TurnOffsets: ints32(ch.Turns),
			DriftRepair:  ch.Opened,
			StrictPrefix: int32(ch.Repairs[schemas.RepairStrictPrefix]), ClippedNorm: int32(ch.Repairs[schemas.RepairClippedNorm]),
			TextRetokened: int32(ch.Repairs[schemas.RepairTextRetokened]),
			Temperature:   float32(res.Sampling.Temperature), TopP: float32(res.Sampling.TopP),
		}
		if row.DriftRepair == "" {
			row.DriftRepair = schemas.RepairNone
		}
		rows.Tokens = append(rows.Tokens, row)
		r := res.Routing[i]
		if r == nil {
			continue
		}
		rec, err := record(r, experts, len(ch.IDs))
		if err != nil {
			return nil, fmt.Errorf("chunk %d routing: %w", i, err)
		}
		rr, err := schemas.NewRoutingRow(run, p.TaskID, p.Attempt, i, rec, routing.Packed)
		if err != nil {
			return nil, err
		}
		rows.Routing = append(rows.Routing, rr)
	}
	var at time.Duration
	for _, t := range res.Turns {
		exit := int32(0)
		for _, e := range t.ExitCodes {
			exit = int32(e)
		}
		rows.Turns = append(rows.Turns, schemas.TurnRow{
			// Text columns hold UTF-8; the exact bytes the policy saw are
			// the token ids.
			Run: run, TaskID: p.TaskID, Attempt: att, Turn: int32(t.Index), Chunk: int32(t.Chunk),
			Action: strings.ToValidUTF8(t.Reply, "\uFFFD"), Observation: strings.ToValidUTF8(t.Observation, "\uFFFD"),
			ExitCode: exit, CompletionTokens: int32(t.Sampled),
			StartMS: at.Milliseconds(), DurationMS: t.Duration.Milliseconds(),
		})
		at += t.Duration
	}
	rows.Trajectory = schemas.TrajectoryRow{
		Run: run, TaskID: p.TaskID, Attempt: att, Iteration: int32(p.Iteration), Purpose: p.Purpose, Suite: p.Suite,
		PolicyVersion: p.PolicyVersion, Seed: p.Seed, Turns: int32(len(res.Turns)), Tokens: int64(res.Sampled),
		Chunks: int32(len(res.Chunks)), Compactions: int32(res.Repairs["compaction"]), Termination: res.Termination,
		SnapshotKey: snapshotKey, DurationMS: took.Milliseconds(),
	}
	return rows, nil
}

// write stores the attempt's four tables and fills their references.
func (s *stage) write(ctx context.Context, run string, p schemas.RolloutRequestedPayload, res *agent.Result, pol Policy, took time.Duration, c *schemas.RolloutCompletedPayload) error {
	rows, err := AttemptRows(run, p, res, pol.Experts, c.Snapshot.Key, took)
	if err != nil {
		return engine.Permanent(err)
	}
	rows.Trajectory.Sandbox, rows.Trajectory.Isolated = c.Sandbox, c.Isolated
	wo := schemas.WriterOptions{TempDir: s.cfg.TempDir}
	if c.TokenRows, err = schemas.WriteTable(ctx, s.cfg.Store, run, p.Iteration, rows.Tokens, wo); err != nil {
		return err
	}
	if len(rows.Routing) > 0 {
		if err := schemas.CheckAligned(c.TokenRows.Key, rows.Tokens, "routing", rows.Routing); err != nil {
			return engine.Permanent(err)
		}
		if c.RoutingRows, err = schemas.WriteTable(ctx, s.cfg.Store, run, p.Iteration, rows.Routing, wo); err != nil {
			return err
		}
	}
	if c.TurnRows, err = schemas.WriteTable(ctx, s.cfg.Store, run, p.Iteration, rows.Turns, wo); err != nil {
		return err
	}
	c.Trajectory, err = schemas.WriteTable(ctx, s.cfg.Store, run, p.Iteration, []schemas.TrajectoryRow{rows.Trajectory}, wo)
	return err
}

func ints32(xs []int) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}

// record converts the sampler's routing into the codec's record of a
// chunk of tokens ids. The sampler never forwards a chunk's last token
// (SGLang returns [tokens−1, layers, top_k]); its row repeats the token
// before it. It changes no loss: the last position predicts nothing and
// no later position attends to it.
func record(r *moe.Routing, experts, tokens int) (*routing.Record, error) {
	if r.Tokens != tokens-1 || r.Tokens < 1 {
		return nil, fmt.Errorf("routing covers %d tokens of a %d-token chunk, want %d", r.Tokens, tokens, tokens-1)
	}
	rec, err := routing.NewRecord(tokens, r.Layers, r.TopK, experts)
	if err != nil {
		return nil, err
	}
	ids := make([]int, r.TopK)
	for t := range tokens {
		src := min(t, r.Tokens-1)
		for l := range r.Layers {
			for j, e := range r.At(src, l) {
				ids[j] = int(e)
			}
			if err := rec.Set(t, l, ids); err != nil {
				return nil, err
			}
		}
	}
	return rec, nil
}
