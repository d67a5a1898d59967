package ppo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trainer"
	"github.com/t1pipe/t1/update"
)

// Config wires the stage.
type Config struct {
	Store   store.ObjectStore
	Trainer trainer.Trainer
	// Initial returns policy version 0 (a fresh model or a configured
	// checkpoint); it is stored the first time a batch of version 0 is
	// trained. Nil means version 0 must already be stored.
	Initial func(ctx context.Context) (*moe.Checkpoint, error)
	// Lineage resolves a branch's ancestors, whose batches it may be
	// handed and whose policies it trains (nil: no branches).
	Lineage update.Lineage
	// MaxStaleness (training.max_staleness) bounds how many versions the
	// policy a batch trains may be newer than the one that sampled it; a
	// batch beyond it is refused, never trained.
	MaxStaleness int
	Log          *slog.Logger
}

// New returns the PPO stage.
func New(cfg Config) engine.Stage {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &stage{cfg: cfg}
	key := func(p schemas.CriticUpdatedPayload) string { return strconv.Itoa(p.Iteration) }
	return update.Stage("ppo", schemas.CriticUpdated, schemas.PolicyUpdated, key, s.train)
}

type stage struct{ cfg Config }

func (s *stage) train(ctx context.Context, run string, p schemas.CriticUpdatedPayload) (*schemas.PolicyUpdatedPayload, error) {
	in, err := update.Read(ctx, s.cfg.Store, s.cfg.Lineage, run,
		update.Claim{Event: schemas.CriticUpdated, Manifest: p.Manifest, Iteration: p.Iteration, PolicyVersion: &p.PolicyVersion})
	if err != nil {
		return nil, err
	}
	m, runs := in.Manifest, in.Runs
	if len(m.ValueFiles) == 0 {
		return nil, batch.Bad(fmt.Errorf("critic.updated: manifest %s lists no value_files", p.Manifest.Key))
	}
	// A stale batch trains the newest policy, not the one that sampled it.
	trains := m.PolicyVersion + m.Staleness
	if m.Staleness > int64(s.cfg.MaxStaleness) {
		return nil, batch.Bad(fmt.Errorf("iteration %d: the batch sampled by policy %d would train policy %d, %d versions newer, above training.max_staleness %d",
			m.Iteration, m.PolicyVersion, trains, m.Staleness, s.cfg.MaxStaleness))
	}
	next := trains + 1
	if done, err := s.done(ctx, keys.TrainingReport(run, m.Iteration, next)); err != nil || done != nil {
		return done, err
	}
	b, err := batch.Load(ctx, s.cfg.Store, m)
	if err != nil {
		return nil, err
	}
	cur, err := checkpoint.EnsurePolicy(ctx, s.cfg.Store, runs, trains, s.cfg.Initial)
	if err != nil {
		return nil, err
	}
	outPrefix := keys.Policy(run, next)
	res, err := s.cfg.Trainer.TrainActor(ctx, trainer.ActorJob{Manifest: m, Batch: b, Policy: cur, Out: outPrefix, Version: next})
	if err != nil {
		return nil, fmt.Errorf("train policy %d on iteration %d: %w", trains, m.Iteration, err)
	}
	if res.Metrics.LossDrift != 0 {
		return nil, batch.Bad(fmt.Errorf("train policy %d on iteration %d: %d loss-region tokens differ between the tokens table and what the trainer saw", trains, m.Iteration, res.Metrics.LossDrift))
	}
	// Staleness is the stage's to know: an external trainer's report
	// need not carry it.
	res.Metrics.Staleness = m.Staleness
	fits := func(c moe.Config) error { return checkpoint.PolicyFits(c, m.Model) }
	if err := checkpoint.Adopt(ctx, s.cfg.Store, res.Checkpoint, outPrefix, fits); err != nil {
		return nil, err
	}
	ck, err := checkpoint.Ref(ctx, s.cfg.Store, outPrefix)
	if err != nil {
		return nil, err
	}
	row := metricRow(b, p, next, res.Metrics)
	mref, err := schemas.WriteTable(ctx, s.cfg.Store, run, m.Iteration, []schemas.MetricRow{row}, schemas.WriterOptions{})
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	ev := &schemas.PolicyUpdatedPayload{
		Iteration: m.Iteration, PolicyVersion: next, PreviousVersion: trains, Checkpoint: ck, Metrics: mref,
		ClipFraction: res.Metrics.ClipFraction, PolicyLoss: res.Metrics.PolicyLoss, LogProbGap: res.Metrics.LogProbGap,
		Skipped: res.Metrics.Skipped,
	}
	report, _ := json.MarshalIndent(trainer.TrainingReport{Metrics: res.Metrics, Event: *ev}, "", "  ")
	key := keys.TrainingReport(run, m.Iteration, next)
	stored, mine, err := store.PutOnce(ctx, s.cfg.Store, key, report, store.PutOptions{ContentType: "application/json"})
	if err != nil {
		return nil, fmt.Errorf("training report: %w", err)
	}
	if !mine {
		// Another delivery finished first: announce what it stored.
		return parseReport(key, stored)
	}
	s.cfg.Log.Info("policy updated", "run", run, "iteration", m.Iteration, "policy_version", next,
		"logprob_gap", res.Metrics.LogProbGap, "clip_fraction", res.Metrics.ClipFraction, "approx_kl", res.Metrics.ApproxKL,
		"live_kl", res.Metrics.LiveKL, "experts_switched", res.Metrics.ExpertsSwitched, "backtracks", res.Metrics.Backtracks, "mismatch_rate", res.Metrics.MismatchRate, "replay", res.Metrics.Replay,
		"staleness", res.Metrics.Staleness, "behaviour_kl", res.Metrics.BehaviourKL, "truncated", res.Metrics.Truncated)
	return ev, nil
}

// done returns the event of an update whose report is stored at key, or
// nil when there is none. A redelivered critic.updated announces it again
// instead of training a second time: an external trainer need not be
// deterministic, and the checkpoint the event names must not change.
func (s *stage) done(ctx context.Context, key string) (*schemas.PolicyUpdatedPayload, error) {
	rc, _, err := s.cfg.Store.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("training report %s: %w", key, err)
	}
	return parseReport(key, data)
}

// parseReport returns the event of the report data stored at key.
func parseReport(key string, data []byte) (*schemas.PolicyUpdatedPayload, error) {
	var r trainer.TrainingReport
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("training report %s: %w", key, err)
	}
	return &r.Event, nil
}

// metricRow summarises the iteration.
func metricRow(b *batch.Batch, p schemas.CriticUpdatedPayload, version int64, met trainer.ActorMetrics) schemas.MetricRow {
	row := schemas.MetricRow{
		Run: b.Manifest.Run, Iteration: int32(b.Manifest.Iteration), PolicyVersion: version,
		Trajectories: int32(len(b.Attempts)), ExplainedVariance: p.ExplainedVariance, ValueLoss: p.ValueLoss,
		LogProbGap: met.LogProbGap, ClipFraction: met.ClipFraction, PolicyLoss: met.PolicyLoss, RoutingFlips: met.MismatchRate,
		ApproxKL: met.ApproxKL, GradNorm: met.GradNorm, LogProbGapMax: met.LogProbGapMax, RoutingMismatches: met.RoutingMismatches,
		RoutingSets: met.RoutingSets, LossDrift: met.LossDrift, Replay: met.Replay, Actions: met.Actions, CriticWarmupSteps: int32(p.WarmupSteps),
		LiveKL: met.LiveKL, ExpertsSwitched: met.ExpertsSwitched,
	}
	var solved int
	for _, a := range b.Attempts {
		row.RewardMean += a.Reward.Reward
		if a.Solved() {
			solved++
		}
		for _, c := range a.Chunks {
			t := c.Tokens
			row.Tokens += int64(len(t.TokenIDs))
			row.StrictPrefix += int64(t.StrictPrefix)
			row.ClippedNorm += int64(t.ClippedNorm)
			row.TextRetokened += int64(t.TextRetokened)
			if t.DriftRepair == schemas.RepairNewChunk {
				row.NewChunk++
			}
		}
	}
	if n := len(b.Attempts); n > 0 {
		row.RewardMean /= float64(n)
		row.ResolveRate = float64(solved) / float64(n)
	}
	return row
}
