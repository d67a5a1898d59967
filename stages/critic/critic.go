package critic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/store"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/rl"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/trainer"
)

// Config wires the stage.
type Config struct {
	Store store.ObjectStore
	// Model is the shape of a fresh critic (initialised from Model.Seed);
	// its vocabulary must cover the policy's.
	Model moe.Config
	Adam  moe.AdamConfig
	// Gamma and Lambda are GAE's discount and trace decay.
	Gamma, Lambda float64
	// ValueClip bounds how far an update moves a value from its
	// pre-update estimate in the loss (0: no clipping).
	ValueClip float64
	// Epochs is the number of Adam steps per iteration (default 1).
	Epochs int
	// MaxGradNorm clips the gradient norm (0: no clipping).
	MaxGradNorm float64
	// WarmupSteps bounds the warm-up of a fresh critic; WarmupEV ends it
	// early once the explained variance reaches it.
	WarmupSteps int
	WarmupEV    float64
	Log         *slog.Logger
}

// New returns the critic stage.
func New(cfg Config) engine.Stage {
	if cfg.Epochs <= 0 {
		cfg.Epochs = 1
	}
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
	if m.Run != ev.Run || m.Iteration != p.Iteration {
		return engine.Permanent(fmt.Errorf("batch.ready: manifest %s is for run %s iteration %d, the event for run %s iteration %d",
			p.Manifest.Key, m.Run, m.Iteration, ev.Run, p.Iteration))
	}
	res, err := s.Iterate(ctx, m)
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
	if b.Actions == 0 {
		return nil, trainer.Bad(fmt.Errorf("batch %s iteration %d has no loss tokens", m.Run, m.Iteration))
	}
	critic, version, err := s.load(ctx, m)
	if err != nil {
		return nil, err
	}
	if critic.Model.Cfg.Vocab < m.Model.Vocab {
		return nil, trainer.Bad(fmt.Errorf("critic vocabulary %d does not cover the policy's %d", critic.Model.Cfg.Vocab, m.Model.Vocab))
	}
	res := &schemas.CriticUpdatedPayload{Iteration: m.Iteration, PolicyVersion: m.PolicyVersion, CriticVersion: int64(m.Iteration) + 1}
	if version == 0 && s.cfg.WarmupSteps > 0 {
		res.Warmup = true
		for step := 0; step < s.cfg.WarmupSteps; step++ {
			st, ev, err := s.evaluate(ctx, critic, b)
			if err != nil {
				return nil, err
			}
			if ev >= s.cfg.WarmupEV {
				break
			}
			loss, err := s.train(ctx, critic, b, st)
			if err != nil {
				return nil, err
			}
			res.WarmupSteps++
			s.cfg.Log.Debug("critic warm-up", "run", m.Run, "iteration", m.Iteration, "step", step, "explained_variance", ev, "value_loss", loss)
		}
	}
	st, ev, err := s.evaluate(ctx, critic, b)
	if err != nil {
		return nil, err
	}
	res.ExplainedVariance = ev
	var rows []schemas.ValueRow
	for _, c := range st {
		t := c.c.Tokens
		rows = append(rows, schemas.ValueRow{Run: m.Run, TaskID: t.TaskID, Attempt: t.Attempt, Chunk: t.Chunk, Iteration: int32(m.Iteration),
			PolicyVersion: m.PolicyVersion, CriticVersion: version, Values: c.vPre, Advantages: c.adv, Returns: c.ret})
	}
	_, ref, mref, err := trainer.WithValues(ctx, s.cfg.Store, m, rows)
	if err != nil {
		return nil, err
	}
	res.Values, res.Manifest = []schemas.FileRef{ref}, mref
	for range s.cfg.Epochs {
		if res.ValueLoss, err = s.train(ctx, critic, b, st); err != nil {
			return nil, err
		}
	}
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		return nil, err
	}
	prefix := trainer.CriticPrefix(m.Run, res.CriticVersion)
	ck := &moe.Checkpoint{Model: critic.Model, Tokenizer: tok, Optimizer: critic.Opt, Meta: map[string]string{"critic_version": strconv.FormatInt(res.CriticVersion, 10)}}
	if err := ck.Save(ctx, s.cfg.Store, prefix); err != nil {
		return nil, fmt.Errorf("critic checkpoint: %w", err)
	}
	if res.Checkpoint, err = trainer.CheckpointRef(ctx, s.cfg.Store, prefix); err != nil {
		return nil, err
	}
	s.cfg.Log.Info("critic updated", "run", m.Run, "iteration", m.Iteration, "critic_version", res.CriticVersion,
		"warmup", res.Warmup, "explained_variance", ev, "value_loss", res.ValueLoss)
	return res, nil
}

// load returns the newest critic with a version ≤ the batch's iteration,
// or a fresh one (version 0).
func (s *stage) load(ctx context.Context, m *schemas.BatchManifest) (*moe.Critic, int64, error) {
	base := strings.TrimSuffix(trainer.CriticPrefix(m.Run, 0), "v000000")
	best := int64(-1)
	for info, err := range s.cfg.Store.List(ctx, base) {
		if err != nil {
			return nil, 0, fmt.Errorf("list critics: %w", err)
		}
		rest := strings.TrimPrefix(info.Key, base)
		dir, file, ok := strings.Cut(rest, "/")
		if !ok || file != moe.WeightsFile || !strings.HasPrefix(dir, "v") {
			continue
		}
		v, err := strconv.ParseInt(dir[1:], 10, 64)
		if err == nil && v <= int64(m.Iteration) && v > best {
			best = v
		}
	}
	if best < 0 {
		c, err := moe.NewCritic(s.cfg.Model, s.cfg.Adam)
		if err != nil {
			return nil, 0, trainer.Bad(fmt.Errorf("critic model: %w", err))
		}
		return c, 0, nil
	}
	ck, err := trainer.LoadCheckpoint(ctx, s.cfg.Store, trainer.CriticPrefix(m.Run, best))
	if err != nil {
		return nil, 0, err
	}
	opt := ck.Optimizer
	if opt == nil {
		opt = moe.NewAdam(ck.Model, s.cfg.Adam)
	}
	opt.Cfg = s.cfg.Adam
	return &moe.Critic{Model: ck.Model, Opt: opt}, best, nil
}

// chunkState is one chunk's pre-update view.
type chunkState struct {
	c              *trainer.Chunk
	ids            []int
	vPre, adv, ret []float32
}

// evaluate computes every chunk's action values, GAE advantages and
// returns, and the explained variance of the values against the returns.
func (s *stage) evaluate(ctx context.Context, critic *moe.Critic, b *trainer.Batch) ([]*chunkState, float64, error) {
	var out []*chunkState
	var mom rl.Moments
	for _, a := range b.Attempts {
		var gc []rl.Chunk
		var sts []*chunkState
		for _, c := range a.Chunks {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
			st := &chunkState{c: c, ids: c.IDs()}
			st.vPre = make([]float32, len(st.ids))
			if len(st.ids) > 0 {
				vals, err := critic.Values(st.ids)
				if err != nil {
					return nil, 0, trainer.Bad(fmt.Errorf("task %s attempt %d chunk %d: %w", a.TaskID, a.Attempt, c.Tokens.Chunk, err))
				}
				if st.vPre, err = rl.ActionValues(c.Tokens.LossMask, vals); err != nil {
					return nil, 0, trainer.Bad(err)
				}
			}
			gc = append(gc, rl.Chunk{Loss: c.Tokens.LossMask, Values: st.vPre})
			sts = append(sts, st)
		}
		adv, ret, err := rl.GAE(gc, a.Reward.Reward, s.cfg.Gamma, s.cfg.Lambda)
		if err != nil {
			return nil, 0, trainer.Bad(err)
		}
		for i, st := range sts {
			st.adv, st.ret = adv[i], ret[i]
			mom.Add(gc[i].Loss, st.ret, st.vPre)
		}
		out = append(out, sts...)
	}
	ev := mom.ExplainedVariance()
	if math.IsNaN(ev) {
		return nil, 0, errors.New("critic: explained variance is NaN")
	}
	return out, ev, nil
}

// train runs one Adam step of the clipped value loss over every chunk,
// anchored on the chunks' pre-update values, and returns the loss.
func (s *stage) train(ctx context.Context, critic *moe.Critic, b *trainer.Batch, st []*chunkState) (float64, error) {
	var vs rl.ValueStats
	for _, c := range st {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if len(c.ids) < 2 {
			continue
		}
		pass, err := critic.Forward(c.ids)
		if err != nil {
			return 0, trainer.Bad(err)
		}
		v, err := rl.ActionValues(c.c.Tokens.LossMask, pass.Values)
		if err != nil {
			return 0, trainer.Bad(err)
		}
		g, err := rl.ValueGrad(&vs, c.c.Tokens.LossMask, v, c.vPre, c.ret, s.cfg.ValueClip, b.Actions)
		if err != nil {
			return 0, trainer.Bad(err)
		}
		// Action t's value is the head's output at position t−1.
		dv := make([]float32, len(pass.Values))
		copy(dv, g[1:])
		if err := critic.Backward(pass, dv); err != nil {
			return 0, err
		}
	}
	critic.Step(s.cfg.MaxGradNorm)
	return vs.MeanLoss(), nil
}
