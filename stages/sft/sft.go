package sft

import (
	"context"
	"errors"
	"fmt"
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
	// Initial returns policy version 0 when it is not stored yet.
	Initial func(ctx context.Context) (*moe.Checkpoint, error)
	// Lineage resolves a branch's ancestors, whose policy it fine-tunes
	// when it has none of its own (nil: no branches).
	Lineage update.Lineage
	Log     *slog.Logger
}

// New returns the SFT stage.
func New(cfg Config) engine.Stage {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &stage{cfg: cfg}
	key := func(p schemas.SFTRequestedPayload) string { return strconv.FormatInt(p.PolicyVersion, 10) }
	return update.Stage("sft", schemas.SFTRequested, schemas.SFTCompleted, key, s.train)
}

type stage struct{ cfg Config }

func (s *stage) train(ctx context.Context, run string, p schemas.SFTRequestedPayload) (*schemas.SFTCompletedPayload, error) {
	if len(p.Data) == 0 {
		return nil, batch.Bad(errors.New("sft.requested: no data"))
	}
	if p.Epochs < 0 || p.PolicyVersion < 0 {
		return nil, batch.Bad(fmt.Errorf("sft.requested: epochs %d, policy version %d", p.Epochs, p.PolicyVersion))
	}
	runs, err := s.cfg.Lineage.Of(ctx, run)
	if err != nil {
		return nil, err
	}
	from, err := checkpoint.EnsurePolicy(ctx, s.cfg.Store, runs, p.PolicyVersion, s.cfg.Initial)
	if err != nil {
		return nil, err
	}
	next := p.PolicyVersion + 1
	prefix := keys.Policy(run, next)
	res, err := s.cfg.Trainer.TrainSFT(ctx, trainer.SFTJob{Run: run, Data: p.Data, Steps: max(p.Epochs, 1),
		Policy: from, Out: prefix, Version: next, Seed: p.Seed})
	if err != nil {
		return nil, fmt.Errorf("sft policy %d: %w", p.PolicyVersion, err)
	}
	// The fine-tuned policy's shape is checked where it is used (rollout
	// samples it, PPO's trainer checks it against each batch).
	if err := checkpoint.Adopt(ctx, s.cfg.Store, res.Checkpoint, prefix, nil); err != nil {
		return nil, err
	}
	ref, err := checkpoint.Ref(ctx, s.cfg.Store, prefix)
	if err != nil {
		return nil, err
	}
	met := res.Metrics
	s.cfg.Log.Info("sft completed", "run", run, "policy_version", next, "sequences", met.Sequences, "epochs", met.Steps,
		"first_loss", met.FirstLoss, "last_loss", met.Loss)
	return &schemas.SFTCompletedPayload{PolicyVersion: next, Checkpoint: ref, Loss: met.Loss}, nil
}
