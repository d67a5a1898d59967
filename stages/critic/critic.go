package critic

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trainer"
)

// Config wires the stage.
type Config struct {
	Store   store.ObjectStore
	Trainer trainer.Trainer
	// GAE is the advantage estimation the critic's values feed.
	GAE trainer.GAE
	// FromPolicy starts a run's first critic from the weights of the
	// policy the batch was sampled with (its initial checkpoint is
	// Initial's, for version 0) instead of a seeded random model.
	FromPolicy bool
	Initial    func(context.Context) (*moe.Checkpoint, error)
	// Lineage resolves a branch's ancestors, whose batches it may be
	// handed and whose checkpoints it starts from (nil: no branches).
	Lineage trainer.Lineage
	Log     *slog.Logger
}

// New returns the critic stage.
func New(cfg Config) engine.Stage {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &stage{cfg: cfg}
	return engine.NewStage("critic", []string{schemas.BatchReady}, s.handle)
}

type stage struct{ cfg Config }

func (s *stage) handle(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	var p schemas.BatchReadyPayload
	if err := ev.Decode(&p); err != nil {
		return err
	}
	m, err := trainer.ReadManifest(ctx, s.cfg.Store, p.Manifest)
	if trainer.IsBad(err) {
		return engine.Permanent(fmt.Errorf("batch.ready: %w", err))
	}
	if err != nil {
		return err
	}
	runs, err := s.cfg.Lineage.Of(ctx, ev.Run)
	if err != nil {
		return err
	}
	if !slices.Contains(runs, m.Run) || m.Iteration != p.Iteration {
		return engine.Permanent(fmt.Errorf("batch.ready: manifest %s is for run %s iteration %d, the event for run %s (lineage %v) iteration %d",
			p.Manifest.Key, m.Run, m.Iteration, ev.Run, runs, p.Iteration))
	}
	// A branch re-running its parent's batch makes the batch its own: what
	// the critic writes goes under the branch's keys.
	own := *m
	own.Run = ev.Run
	res, err := s.Iterate(ctx, &own)
	if trainer.IsBad(err) {
		return engine.Permanent(err)
	}
	if err != nil {
		return err
	}
	_, err = out.Emit(schemas.CriticUpdated, res, engine.WithKey(strconv.Itoa(m.Iteration)))
	return err
}

// Iterate runs one critic iteration over the batch of m (see the package
// doc) and returns the payload of critic.updated.
func (s *stage) Iterate(ctx context.Context, m *schemas.BatchManifest) (*schemas.CriticUpdatedPayload, error) {
	b, err := trainer.LoadBatch(ctx, s.cfg.Store, m)
	if err != nil {
		return nil, err
	}
	runs, err := s.cfg.Lineage.Of(ctx, m.Run)
	if err != nil {
		return nil, err
	}
	version, from, err := trainer.LatestCritic(ctx, s.cfg.Store, runs, int64(m.Iteration))
	if err != nil {
		return nil, err
	}
	next := int64(m.Iteration) + 1
	prefix := keys.Critic(m.Run, next)
	job := trainer.CriticJob{Manifest: m, Batch: b, Critic: from, Out: prefix, Version: next, GAE: s.cfg.GAE}
	if from == "" && s.cfg.FromPolicy {
		if job.Policy, err = trainer.EnsurePolicy(ctx, s.cfg.Store, runs, m.PolicyVersion, s.cfg.Initial); err != nil {
			return nil, err
		}
	}
	tr, err := s.cfg.Trainer.TrainCritic(ctx, job)
	if err != nil {
		return nil, err
	}
	rows, err := trainer.ValueRows(b, tr.Values, version)
	if err != nil {
		return nil, err
	}
	_, ref, mref, err := trainer.WithValues(ctx, s.cfg.Store, m, rows)
	if err != nil {
		return nil, err
	}
	fits := func(c moe.Config) error { return trainer.CriticFits(c, m.Model) }
	if err := trainer.Adopt(ctx, s.cfg.Store, tr.Checkpoint, prefix, fits); err != nil {
		return nil, err
	}
	ck, err := trainer.CheckpointRef(ctx, s.cfg.Store, prefix)
	if err != nil {
		return nil, err
	}
	met := tr.Metrics
	s.cfg.Log.Info("critic updated", "run", m.Run, "iteration", m.Iteration, "critic_version", next,
		"warmup", met.Warmup, "explained_variance", met.ExplainedVariance, "value_loss", met.ValueLoss)
	return &schemas.CriticUpdatedPayload{Iteration: m.Iteration, PolicyVersion: m.PolicyVersion, CriticVersion: next,
		Warmup: met.Warmup, WarmupSteps: met.WarmupSteps, WarmupEnd: met.WarmupEnd, ExplainedVariance: met.ExplainedVariance, ValueLoss: met.ValueLoss,
		Values: []schemas.FileRef{ref}, Manifest: mref, Checkpoint: ck}, nil
}
