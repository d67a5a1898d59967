package sft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// Initial returns policy version 0 when it is not stored yet.
	Initial func(ctx context.Context) (*moe.Checkpoint, error)
	// Lineage resolves a branch's ancestors, whose policy it fine-tunes
	// when it has none of its own (nil: no branches).
	Lineage trainer.Lineage
	Log     *slog.Logger
}

// New returns the SFT stage.
func New(cfg Config) engine.Stage {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &stage{cfg: cfg}
	return engine.NewStage("sft", []string{schemas.SFTRequested}, s.handle)
}

type stage struct{ cfg Config }

func (s *stage) handle(ctx context.Context, ev engine.Event, out engine.Emitter) error {
	var p schemas.SFTRequestedPayload
	if err := ev.Decode(&p); err != nil {
		return err
	}
	res, err := s.train(ctx, ev.Run, p)
	if trainer.IsBad(err) {
		return engine.Permanent(err)
	}
	if err != nil {
		return err
	}
	_, err = out.Emit(schemas.SFTCompleted, res, engine.WithKey(strconv.FormatInt(p.PolicyVersion, 10)))
	return err
}

func (s *stage) train(ctx context.Context, run string, p schemas.SFTRequestedPayload) (*schemas.SFTCompletedPayload, error) {
	if len(p.Data) == 0 {
		return nil, trainer.Bad(errors.New("sft.requested: no data"))
	}
	if p.Epochs < 0 || p.PolicyVersion < 0 {
		return nil, trainer.Bad(fmt.Errorf("sft.requested: epochs %d, policy version %d", p.Epochs, p.PolicyVersion))
	}
	runs, err := s.cfg.Lineage.Of(ctx, run)
	if err != nil {
		return nil, err
	}
	from, err := trainer.EnsurePolicy(ctx, s.cfg.Store, runs, p.PolicyVersion, s.cfg.Initial)
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
	if err := trainer.Adopt(ctx, s.cfg.Store, res.Checkpoint, prefix, nil); err != nil {
		return nil, err
	}
	ref, err := trainer.CheckpointRef(ctx, s.cfg.Store, prefix)
	if err != nil {
		return nil, err
	}
	met := res.Metrics
	s.cfg.Log.Info("sft completed", "run", run, "policy_version", next, "sequences", met.Sequences, "epochs", met.Steps,
		"first_loss", met.FirstLoss, "last_loss", met.Loss)
	return &schemas.SFTCompletedPayload{PolicyVersion: next, Checkpoint: ref, Loss: met.Loss}, nil
}
