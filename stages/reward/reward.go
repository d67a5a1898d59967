// Package reward scores finished attempts: it restores an attempt's final
// sandbox state from its snapshot into a fresh sandbox of the task, runs
// the task's verifier there, and turns the report into a reward — passed
// assertions × a scale fixed before the run (ARCHITECTURE.md §1.4), or the binary
// outcome when the verifier gave no per-assertion report, so a solved task
// never scores zero.
//
// Scoring from the snapshot rather than inside the rollout's sandbox is
// what makes reward replayable: a fixed verifier can re-score every
// trajectory of a run without rolling anything out again. It is also what
// keeps the agent from fooling the verifier (trial.VerifyLayer): processes
// the agent left running are not part of a snapshot, so none is alive
// while the verifier runs (verifiers that query a live service see none).
//
//	rollout.completed ─▶ reward ─▶ reward.scored  (+ a rewards-table object)
package reward

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

// Config wires the stage.
type Config struct {
	Store store.ObjectStore
	Trial trial.Options
	Settings
	// Log is where each run's run.started is read, for the reward scale
	// the run froze before it began.
	Log *engine.Log
	// MaxSnapshotBytes bounds a snapshot read back; the default is the
	// largest layer a sandbox under Trial.Limits writes
	// (sandbox.Limits.MaxLayer), so every snapshot a rollout could store
	// is read.
	MaxSnapshotBytes int64
	TempDir          string
}

// New returns the reward stage; an error means its settings score
// nothing (an unknown mode, a scale that is not a finite number above 0).
func New(cfg Config) (engine.Stage, error) {
	rf, err := verifier.NewRewardFunc(cfg.Mode, cfg.Scale)
	if err != nil {
		return nil, err
	}
	if cfg.MaxSnapshotBytes <= 0 {
		cfg.MaxSnapshotBytes = cfg.Trial.Limits.MaxLayer()
	}
	s := &stage{cfg: cfg, rf: rf, scales: map[string]float64{}}
	return engine.NewStage("reward", []string{schemas.RolloutCompleted}, s.handle), nil
}

type stage struct {
	cfg    Config
	rf     verifier.RewardFunc
	mu     sync.Mutex
	scales map[string]float64
}

// rewardFunc is the stage's reward function with the scale run.started
// froze for run.
func (s *stage) rewardFunc(ctx context.Context, run string) (verifier.RewardFunc, error) {
	rf := s.rf
	if s.cfg.Log == nil {
		return rf, nil
	}
	s.mu.Lock()
	scale, ok := s.scales[run]
	s.mu.Unlock()
	if !ok {
		err := s.cfg.Log.Replay(ctx, []string{engine.Subject(run, schemas.RunStarted)}, engine.ReplayFrom{}, func(ev engine.Event) error {
			var p schemas.RunStartedPayload
			if ev.Decode(&p) == nil && p.RewardScale > 0 && scale == 0 {
				scale = p.RewardScale
			}
			return nil
		})
		if err != nil {
			return rf, err
		}
		s.mu.Lock()
		s.scales[run] = scale
		s.mu.Unlock()
	}
	if scale > 0 {
		rf.Scale = scale
	}
	return rf, nil
}

func (s *stage) handle(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	var p schemas.RolloutCompletedPayload
	if err := ev.Decode(&p); err != nil {
		return err
	}
	rep, err := s.verify(ctx, ev.Run, p)
	if err != nil {
		return err
	}
	if len(rep.Problems) > 0 {
		// The verifier's own output was unusable in part; the attempt is
		// still scored from what remained (at worst its exit code), so the
		// problems are reported here rather than failing the event.
		slog.Warn("verifier report problems", "run", ev.Run, "task", p.TaskID, "attempt", p.Attempt,
			"source", rep.Source, "problems", rep.Problems)
	}
	rf, err := s.rewardFunc(ctx, ev.Run)
	if err != nil {
		return err
	}
	score := rf.Score(rep)
	if s.cfg.Unfinished == UnfinishedZero && p.Purpose == schemas.PurposeTrain && p.Termination != agent.EndComplete {
		score.Value = 0
	}
	row := schemas.RewardRow{
		Run: ev.Run, TaskID: p.TaskID, Attempt: int32(p.Attempt), Iteration: int32(p.Iteration), Purpose: p.Purpose,
		PolicyVersion: p.PolicyVersion, Passed: int32(rep.Passed), Total: int32(rep.Total), Scale: rf.Scale,
		Reward: score.Value, Source: string(rep.Source), Fallback: score.Fallback, ExitCode: int32(rep.ExitCode),
	}
	for _, a := range rep.Assertions {
		row.Assertions = append(row.Assertions, schemas.Assertion{Name: a.Name, Passed: a.Status == verifier.Passed})
	}
	ref, err := schemas.WriteTable(ctx, s.cfg.Store, ev.Run, p.Iteration, []schemas.RewardRow{row}, schemas.WriterOptions{TempDir: s.cfg.TempDir})
	if err != nil {
		return err
	}
	_, err = out.Emit(schemas.RewardScored, schemas.RewardScoredPayload{
		TaskID: p.TaskID, Attempt: p.Attempt, Purpose: p.Purpose, Suite: p.Suite, Iteration: p.Iteration,
		PolicyVersion: p.PolicyVersion, Reward: score.Value, Passed: rep.Passed, Total: rep.Total,
		Source: string(rep.Source), Fallback: score.Fallback, Rewards: ref,
	}, engine.WithKey(fmt.Sprintf("%s/%d", p.TaskID, p.Attempt)))
	return err
}

// verify restores the attempt's snapshot into a fresh sandbox of the task
// and runs the verifier there.
func (s *stage) verify(ctx context.Context, run string, p schemas.RolloutCompletedPayload) (*verifier.Report, error) {
	work, releaseWork, err := hostres.MkdirTemp(s.cfg.TempDir, "t1-reward-", "reward scratch")
	if err != nil {
		return nil, err
	}
	defer releaseWork()
	dir := filepath.Join(work, "task")
	t, _, err := trial.Fetch(ctx, s.cfg.Store, run, p.TaskID, p.Bundle, dir)
	if trial.Unusable(err) {
		return nil, engine.Permanent(err)
	}
	if err != nil {
		return nil, err
	}
	snap, err := s.snapshot(ctx, work, p.Snapshot)
	if err != nil {
		return nil, err
	}
	if snap != nil {
		defer snap.Close()
	}
	if s.cfg.Trial.Backend == nil {
		return nil, engine.Permanent(errors.New("reward: no sandbox backend"))
	}
	var layer io.Reader
	if snap != nil {
		layer = snap
	}
	rep, _, _, err := trial.VerifyLayer(ctx, layer, dir, t, s.cfg.Trial)
	if errors.Is(err, sandbox.ErrUnisolated) || errors.Is(err, trial.ErrLayer) {
		return nil, engine.Permanent(fmt.Errorf("%s: snapshot %s: %w", p.TaskID, p.Snapshot.Key, err))
	}
	return rep, err
}

// snapshot spools the attempt's snapshot into a file under work, checking
// its size and hash on the way, and returns the file at its start (nil
// when the attempt stored none).
func (s *stage) snapshot(ctx context.Context, work string, ref schemas.ObjectRef) (*os.File, error) {
	if ref.Key == "" {
		return nil, nil
	}
	rc, _, err := s.cfg.Store.Get(ctx, ref.Key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, engine.Permanent(fmt.Errorf("snapshot %s: %w", ref.Key, err))
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	f, err := os.Create(filepath.Join(work, "snapshot.tar"))
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(rc, s.cfg.MaxSnapshotBytes+1))
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot %s: %w", ref.Key, err)
	}
	if n > s.cfg.MaxSnapshotBytes {
		f.Close()
		return nil, engine.Permanent(fmt.Errorf("snapshot %s is over %d bytes", ref.Key, s.cfg.MaxSnapshotBytes))
	}
	if sum := hex.EncodeToString(h.Sum(nil)); ref.SHA256 != "" && sum != ref.SHA256 {
		f.Close()
		return nil, engine.Permanent(fmt.Errorf("snapshot %s: sha256 %s, the event says %s", ref.Key, sum, ref.SHA256))
	}
	return f, nil
}
