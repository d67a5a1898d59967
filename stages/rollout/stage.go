package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/tokenizer"
	"github.com/t1pipe/t1/trial"
)

// Policy is one policy version as the harness uses it.
type Policy struct {
	Engine    inference.Engine
	Tokenizer tokenizer.Tokenizer
	// Experts is the model's expert count, which the routing codec needs.
	Experts int
	// Hold, when set, pins a shared remote engine to this version for one
	// episode (inference.Synced): it returns the engine to sample from and
	// the release to call when the episode is done. A reply from other
	// weights fails the attempt, which is retried, so no rollout trains
	// as a version that did not serve it.
	Hold func(ctx context.Context) (inference.Engine, func(), error)
}

// Policies resolves a run's policy version. Called once per attempt; it
// may cache.
type Policies func(ctx context.Context, run string, version int64) (Policy, error)

// StageConfig wires the rollout stage.
type StageConfig struct {
	Store   store.ObjectStore
	Trial   trial.Options
	Episode agent.Config
	// TrainTemperature, when positive, samples training attempts in place
	// of Episode's temperature (stages.rollout.train_temperature).
	TrainTemperature float64
	// EpisodeVersion is stages.rollout.episode_version: under
	// agent.EpisodeLatest a training attempt moves to the newest stored
	// policy version between turns.
	EpisodeVersion agent.EpisodeVersion
	// Lineage returns a run, then the runs it branched from, nearest
	// first (engine.Log.Lineage; nil: no branches).
	Lineage  func(ctx context.Context, run string) ([]string, error)
	Policies Policies
	TempDir  string
}

// NewStage returns the rollout stage: rollout.requested → rollout.completed.
func NewStage(cfg StageConfig) engine.Stage {
	s := &stage{cfg: cfg}
	return engine.NewStage("rollout", []string{schemas.RolloutRequested}, s.handle)
}

type stage struct{ cfg StageConfig }

func (s *stage) handle(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	var p schemas.RolloutRequestedPayload
	if err := ev.Decode(&p); err != nil {
		return err
	}
	if p.TaskID == "" || p.Attempt < 0 || p.Iteration < 0 || (p.Purpose != "train" && p.Purpose != "eval" && p.Purpose != "sft") {
		return engine.Permanent(fmt.Errorf("rollout.requested: task %q, attempt %d, iteration %d, purpose %q", p.TaskID, p.Attempt, p.Iteration, p.Purpose))
	}
	key := engine.WithKey(p.AttemptID().Name())
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
	marker := keys.AttemptMarker(ev.Run, p.AttemptID())
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
	key := keys.AttemptMarker(run, p.AttemptID())
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
	work, releaseWork, err := hostres.MkdirTemp(s.cfg.TempDir, "t1-rollout-", "rollout scratch")
	if err != nil {
		return nil, err
	}
	defer releaseWork()
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
	chat, err := s.cfg.Episode.Chat(pol.Tokenizer)
	if err != nil {
		return nil, engine.Permanent(err)
	}
	format, err := s.cfg.Episode.Format()
	if err != nil {
		return nil, engine.Permanent(err)
	}
	if s.cfg.Trial.Backend == nil {
		return nil, engine.Permanent(errors.New("rollout: no sandbox backend"))
	}
	policy := pol.Engine
	var release func()
	if pol.Hold != nil && p.Purpose != "sft" {
		// Held before the sandbox starts: waiting for the engine to swap
		// weights should not keep a sandbox idle.
		var err error
		if policy, release, err = pol.Hold(ctx); err != nil {
			return nil, fmt.Errorf("policy %d: %w", p.PolicyVersion, err)
		}
	}
	var switching *latest
	if s.cfg.EpisodeVersion == agent.EpisodeLatest && p.Purpose == schemas.PurposeTrain {
		lineage := []string{run}
		if s.cfg.Lineage != nil {
			if lineage, err = s.cfg.Lineage(ctx, run); err != nil {
				if release != nil {
					release()
				}
				return nil, fmt.Errorf("lineage of %s: %w", run, err)
			}
		}
		switching = &latest{st: s.cfg.Store, policies: s.cfg.Policies, lineage: lineage, run: run, attempt: p.AttemptID(), cur: p.PolicyVersion, eng: policy, release: release}
		policy, release = switching, switching.close
	}
	if release != nil {
		defer release()
	}
	sb, err := s.cfg.Trial.Start(ctx, dir)
	if errors.Is(err, sandbox.ErrUnisolated) {
		return nil, engine.Permanent(fmt.Errorf("sandbox for %s: %w", p.TaskID, err))
	}
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
	if p.Purpose == schemas.PurposeTrain && s.cfg.TrainTemperature > 0 {
		ec.Sampling.Temperature = s.cfg.TrainTemperature
	}
	if d := t.Config.AgentTimeout(); d > 0 && (ec.WallClock == 0 || d < ec.WallClock) {
		ec.WallClock = d
	}
	if p.Purpose == "sft" {
		// A demonstration: the reference solution through the same harness,
		// its tokens the supervised data.
		if policy, err = agent.FromSolution(chat, format, string(t.Files[harbor.SolutionPath].Data)); err != nil {
			return nil, engine.Permanent(fmt.Errorf("task %s: %w", p.TaskID, err))
		}
		// Its commands get the task's own time limit, as the solution
		// has when `t1 tasks check` runs it.
		ec = ec.ForSolution(t.Config.AgentTimeout())
	}
	res, err := agent.Run(ctx, policy, chat, sh, t.Instruction, ec, nil)
	if err != nil {
		return nil, err
	}
	if p.Purpose == "sft" {
		if err := res.CutShort(); err != nil {
			// Trained on, it would teach a solution that stops halfway.
			return nil, engine.Permanent(fmt.Errorf("demonstration of %s refused: %w", p.TaskID, err))
		}
	}
	c := &schemas.RolloutCompletedPayload{
		TaskID: p.TaskID, Attempt: p.Attempt, Purpose: p.Purpose, Suite: p.Suite, Iteration: p.Iteration,
		PolicyVersion: p.PolicyVersion, Turns: len(res.Turns), Tokens: int64(res.Sampled), Chunks: len(res.Chunks),
		Termination: res.Termination, Bundle: bundle, Sandbox: sb.Info().Backend, Isolated: sb.Info().Isolated,
		Drift: schemas.DriftCounts{
			StrictPrefix: res.Repairs[schemas.RepairStrictPrefix], ClippedNorm: res.Repairs[schemas.RepairClippedNorm],
			TextRetokened: res.Repairs[schemas.RepairTextRetokened], NewChunk: res.Repairs[schemas.RepairNewChunk],
		},
		MalformedReplies: res.Malformed,
	}
	if res.LossDrift != 0 {
		return nil, engine.Permanent(fmt.Errorf("attempt %s: %d loss-region tokens drifted from the sampler's", p.AttemptID().Name(), res.LossDrift))
	}
	// The shell's background jobs end before the snapshot: nothing changes
	// the files while they are read.
	sh.Close()
	if network, reqs, omitted := trial.Network(sb); network != egress.None {
		c.Network, c.EgressOmitted = network, omitted
		for _, q := range reqs {
			c.Egress = append(c.Egress, schemas.EgressRequest{Host: q.Host, Port: q.Port, Method: q.Method, Allowed: q.Allowed, Reason: q.Reason, Bytes: q.Bytes})
		}
	}
	if c.Snapshot, err = s.snapshot(ctx, run, p, sb); err != nil {
		return nil, err
	}
	var versions []int64
	if switching != nil {
		versions = switching.versions
		c.LastVersion = switching.cur
	}
	if err := s.write(ctx, run, p, res, pol, versions, time.Since(start), c); err != nil {
		return nil, err
	}
	return c, nil
}

// snapshot spools the attempt's layer to a temporary file, hashing it on
// the way, and stores it from there: a layer can be as large as the
// sandbox's disk budget, which memory need not hold.
func (s *stage) snapshot(ctx context.Context, run string, p schemas.RolloutRequestedPayload, sb sandbox.Sandbox) (schemas.ObjectRef, error) {
	f, releaseSnap, err := hostres.CreateTemp(s.cfg.TempDir, "t1-snapshot-", "snapshot")
	if err != nil {
		return schemas.ObjectRef{}, fmt.Errorf("snapshot: %w", err)
	}
	defer releaseSnap()
	h := sha256.New()
	if err := sb.Snapshot(ctx, io.MultiWriter(f, h)); err != nil {
		if errors.Is(err, sandbox.ErrLayerLimit) {
			// The attempt's own doing: a retry would meet the same state.
			return schemas.ObjectRef{}, engine.Permanent(fmt.Errorf("snapshot: %w", err))
		}
		return schemas.ObjectRef{}, fmt.Errorf("snapshot: %w", err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return schemas.ObjectRef{}, fmt.Errorf("snapshot: %w", err)
	}
	key := keys.Snapshot(run, p.AttemptID())
	// Another delivery of this attempt may have stored its snapshot first.
	// An overwrite would change the bytes under the hash that delivery may
	// already have announced, so the stored one is this attempt's.
	stored, _, err := store.PutOnceSum(ctx, s.cfg.Store, key, f, store.Sum{Size: size, SHA256: hex.EncodeToString(h.Sum(nil))},
		store.PutOptions{ContentType: "application/x-tar"})
	if err != nil {
		return schemas.ObjectRef{}, fmt.Errorf("store snapshot: %w", err)
	}
	return schemas.ObjectRef{Key: key, Bytes: stored.Size, SHA256: stored.SHA256}, nil
}

// write stores the attempt's four tables and fills their references.
// versions, when set, is the policy version of every turn (episode_version
// latest): each turn's and each chunk's rows then carry their own.
func (s *stage) write(ctx context.Context, run string, p schemas.RolloutRequestedPayload, res *agent.Result, pol Policy, versions []int64, took time.Duration, c *schemas.RolloutCompletedPayload) error {
	rows, err := agent.AttemptRows(run, p, res, pol.Experts, c.Snapshot.Key, took)
	if err != nil {
		return engine.Permanent(err)
	}
	if versions != nil {
		if err := rows.TurnVersions(versions); err != nil {
			return engine.Permanent(err)
		}
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
