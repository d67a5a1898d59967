package critic

import (
	"context"
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
	// GAE is the advantage estimation the critic's values feed.
	GAE trainer.GAE
	// FromPolicy starts a run's first critic from the weights of the
	// policy the batch was sampled with (its initial checkpoint is
	// Initial's, for version 0) instead of a seeded random model.
	FromPolicy bool
	Initial    func(context.Context) (*moe.Checkpoint, error)
	// Lineage resolves a branch's ancestors, whose batches it may be
	// handed and whose checkpoints it starts from (nil: no branches).
	Lineage update.Lineage
	Log     *slog.Logger
}

// New returns the critic stage.
func New(cfg Config) engine.Stage {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &stage{cfg: cfg}
	key := func(p schemas.BatchReadyPayload) string { return strconv.Itoa(p.Iteration) }
	return update.Stage("critic", schemas.BatchReady, schemas.CriticUpdated, key, s.handle)
}

type stage struct{ cfg Config }

func (s *stage) handle(ctx context.Context, run string, p schemas.BatchReadyPayload) (*schemas.CriticUpdatedPayload, error) {
	in, err := update.Read(ctx, s.cfg.Store, s.cfg.Lineage, run, update.Claim{Event: schemas.BatchReady, Manifest: p.Manifest, Iteration: p.Iteration})
	if err != nil {
		return nil, err
	}
	return s.Iterate(ctx, in)
}

// Iterate runs one critic iteration over the batch in (see the package
// doc) and returns the payload of critic.updated.
func (s *stage) Iterate(ctx context.Context, in *update.Input) (*schemas.CriticUpdatedPayload, error) {
	m, runs := in.Manifest, in.Runs
	b, err := batch.Load(ctx, s.cfg.Store, m)
	if err != nil {
		return nil, err
	}
	version, from, err := checkpoint.LatestCritic(ctx, s.cfg.Store, runs, int64(m.Iteration))
	if err != nil {
		return nil, err
	}
	next := int64(m.Iteration) + 1
	prefix := keys.Critic(m.Run, next)
	job := trainer.CriticJob{Manifest: m, Batch: b, Critic: from, Out: prefix, Version: next, GAE: s.cfg.GAE}
	if from == "" && s.cfg.FromPolicy {
		if job.Policy, err = checkpoint.EnsurePolicy(ctx, s.cfg.Store, runs, m.PolicyVersion, s.cfg.Initial); err != nil {
			return nil, err
		}
	}
	tr, err := s.cfg.Trainer.TrainCritic(ctx, job)
	if err != nil {
		return nil, err
	}
	rows, err := batch.ValueRows(b, tr.Values, version)
	if err != nil {
		return nil, err
	}
	_, ref, mref, err := batch.WithValues(ctx, s.cfg.Store, m, rows)
	if err != nil {
		return nil, err
	}
	fits := func(c moe.Config) error { return checkpoint.CriticFits(c, m.Model) }
	if err := checkpoint.Adopt(ctx, s.cfg.Store, tr.Checkpoint, prefix, fits); err != nil {
		return nil, err
	}
	ck, err := checkpoint.Ref(ctx, s.cfg.Store, prefix)
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
