package sft

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/store"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/trainer"
)

// Config wires the stage.
type Config struct {
	Store store.ObjectStore
	// Adam is the optimiser, at a constant learning rate.
	Adam moe.AdamConfig
	// MaxGradNorm clips the gradient norm (0: no clipping).
	MaxGradNorm float64
	// Batch is the number of demonstrations each step trains on, taken in
	// turn from the sorted rows so every one is seen once every
	// ceil(n/Batch) steps; 0 or at least n trains each step on all.
	Batch int
	// Initial returns policy version 0 when it is not stored yet.
	Initial func(ctx context.Context) (*moe.Checkpoint, error)
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
	epochs := max(p.Epochs, 1)
	var rows []schemas.TokenRow
	if err := trainer.ReadRows(ctx, s.cfg.Store, p.Data, &rows); err != nil {
		return nil, err
	}
	slices.SortFunc(rows, func(a, b schemas.TokenRow) int {
		return cmp.Or(cmp.Compare(a.TaskID, b.TaskID), cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.Chunk, b.Chunk))
	})
	var seqs [][]int
	var masks [][]float32
	for _, r := range rows {
		if len(r.LossMask) != len(r.TokenIDs) {
			return nil, trainer.Bad(fmt.Errorf("tokens of task %s attempt %d chunk %d: %d ids, %d mask entries", r.TaskID, r.Attempt, r.Chunk, len(r.TokenIDs), len(r.LossMask)))
		}
		if len(r.TokenIDs) < 2 {
			continue
		}
		ids := make([]int, len(r.TokenIDs))
		for i, id := range r.TokenIDs {
			ids[i] = int(id)
		}
		// Mask entry t weighs target t+1.
		mask := make([]float32, len(ids)-1)
		has := false
		for t := range mask {
			if r.LossMask[t+1] {
				mask[t], has = 1, true
			}
		}
		if has {
			seqs, masks = append(seqs, ids), append(masks, mask)
		}
	}
	if len(seqs) == 0 {
		return nil, trainer.Bad(fmt.Errorf("sft.requested: %d token rows, none with a loss token", len(rows)))
	}
	if err := trainer.EnsurePolicy(ctx, s.cfg.Store, run, p.PolicyVersion, s.cfg.Initial); err != nil {
		return nil, err
	}
	ck, err := trainer.LoadCheckpoint(ctx, s.cfg.Store, trainer.PolicyPrefix(run, p.PolicyVersion))
	if err != nil {
		return nil, err
	}
	opt := moe.NewAdam(ck.Model, s.cfg.Adam)
	var first, loss float64
	for epoch := range epochs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		bs, bm := minibatch(seqs, masks, epoch, s.cfg.Batch)
		if loss, err = moe.SFTStep(ck.Model, opt, bs, bm, s.cfg.MaxGradNorm); err != nil {
			return nil, trainer.Bad(err)
		}
		if epoch == 0 {
			first = loss
		}
	}
	next := p.PolicyVersion + 1
	prefix := trainer.PolicyPrefix(run, next)
	out := &moe.Checkpoint{Model: ck.Model, Tokenizer: ck.Tokenizer, Meta: map[string]string{"policy_version": strconv.FormatInt(next, 10), "sft_from": strconv.FormatInt(p.PolicyVersion, 10)}}
	if err := out.Save(ctx, s.cfg.Store, prefix); err != nil {
		return nil, fmt.Errorf("sft checkpoint: %w", err)
	}
	ref, err := trainer.CheckpointRef(ctx, s.cfg.Store, prefix)
	if err != nil {
		return nil, err
	}
	s.cfg.Log.Info("sft completed", "run", run, "policy_version", next, "sequences", len(seqs), "epochs", epochs, "first_loss", first, "last_loss", loss)
	return &schemas.SFTCompletedPayload{PolicyVersion: next, Checkpoint: ref, Loss: loss}, nil
}

// minibatch returns the demonstrations of step k: size of them, starting
// where step k−1 stopped and wrapping around. No randomness is needed for
// a replay to train identically, and every demonstration is used equally.
func minibatch(seqs [][]int, masks [][]float32, k, size int) ([][]int, [][]float32) {
	n := len(seqs)
	if size <= 0 || size >= n {
		return seqs, masks
	}
	bs, bm := make([][]int, size), make([][]float32, size)
	for i := range size {
		j := (k*size + i) % n
		bs[i], bm[i] = seqs[j], masks[j]
	}
	return bs, bm
}
