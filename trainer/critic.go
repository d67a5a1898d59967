package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/rl"
)

// TrainCritic runs one critic iteration (see CriticJob): it loads the
// critic (or makes a fresh one of shape Opt.Critic.Model and warms it up
// until the explained variance reaches WarmupEV or WarmupSteps steps have
// run), takes its values, advantages and returns, trains Opt.Critic.Epochs
// Adam steps of the value loss clipped around those values, and saves the
// critic with its optimiser state under job.Out. The critic routes live:
// it is never sampled from, so there is no served routing to replay.
func (r *Reference) TrainCritic(ctx context.Context, job CriticJob) (*CriticResult, error) {
	if err := distinct(job.Critic, job.Out); err != nil {
		return nil, err
	}
	b, err := r.batch(ctx, job.Batch, job.Manifest)
	if err != nil {
		return nil, err
	}
	m := b.Manifest
	if b.Actions == 0 {
		return nil, Bad(fmt.Errorf("batch %s iteration %d has no loss tokens", m.Run, m.Iteration))
	}
	model, opt, err := r.critic(ctx, job.Critic)
	if err != nil {
		return nil, err
	}
	if err := CriticFits(model.Cfg, m.Model); err != nil {
		return nil, Bad(err)
	}
	o := r.Opt.Critic
	res := &CriticResult{Checkpoint: job.Out}
	if job.Critic == "" && o.WarmupSteps > 0 {
		res.Metrics.Warmup = true
		for step := 0; step < o.WarmupSteps; step++ {
			st, ev, err := evaluate(ctx, model, b, job.GAE)
			if err != nil {
				return nil, err
			}
			if ev >= o.WarmupEV {
				break
			}
			loss, err := r.valueStep(ctx, model, opt, b, st)
			if err != nil {
				return nil, err
			}
			res.Metrics.WarmupSteps++
			r.Opt.Log.Debug("critic warm-up", "run", m.Run, "iteration", m.Iteration, "step", step, "explained_variance", ev, "value_loss", loss)
		}
	}
	st, ev, err := evaluate(ctx, model, b, job.GAE)
	if err != nil {
		return nil, err
	}
	res.Metrics.ExplainedVariance = ev
	for _, c := range st {
		t := c.c.Tokens
		res.Values = append(res.Values, ChunkValues{TaskID: t.TaskID, Attempt: t.Attempt, Chunk: t.Chunk, Values: c.vPre, Advantages: c.adv, Returns: c.ret})
	}
	for range o.Epochs {
		if res.Metrics.ValueLoss, err = r.valueStep(ctx, model, opt, b, st); err != nil {
			return nil, err
		}
		res.Metrics.Steps++
	}
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		return nil, err
	}
	ck := &moe.Checkpoint{Model: model, Tokenizer: tok, Optimizer: opt, Meta: map[string]string{"critic_version": strconv.FormatInt(job.Version, 10)}}
	if err := ck.Save(ctx, r.Store, job.Out); err != nil {
		return nil, fmt.Errorf("critic checkpoint: %w", err)
	}
	return res, nil
}

// critic loads the critic under prefix with its optimiser at the
// configured settings, or makes a fresh one when prefix is "".
func (r *Reference) critic(ctx context.Context, prefix string) (*moe.Model, *moe.Adam, error) {
	o := r.Opt.Critic
	if prefix == "" {
		m, err := moe.NewModel(o.Model)
		if err != nil {
			return nil, nil, Bad(fmt.Errorf("critic model: %w", err))
		}
		return m, moe.NewAdam(m, o.Adam), nil
	}
	ck, err := LoadCheckpoint(ctx, r.Store, prefix)
	if err != nil {
		return nil, nil, err
	}
	opt := ck.Optimizer
	if opt == nil {
		opt = moe.NewAdam(ck.Model, o.Adam)
	}
	opt.Cfg = o.Adam
	return ck.Model, opt, nil
}

// chunkState is one chunk's pre-update view.
type chunkState struct {
	c              *Chunk
	ids            []int
	vPre, adv, ret []float32
}

// evaluate computes every chunk's action values, GAE advantages and
// returns, and the explained variance of the values against the returns.
func evaluate(ctx context.Context, critic *moe.Model, b *Batch, gae GAE) ([]*chunkState, float64, error) {
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
				p, err := critic.Forward(st.ids, moe.ForwardOptions{})
				if err != nil {
					return nil, 0, Bad(fmt.Errorf("task %s attempt %d chunk %d: critic: %w", a.TaskID, a.Attempt, c.Tokens.Chunk, err))
				}
				if st.vPre, err = rl.ActionValues(c.Tokens.LossMask, p.Values); err != nil {
					return nil, 0, Bad(err)
				}
			}
			gc = append(gc, rl.Chunk{Loss: c.Tokens.LossMask, Values: st.vPre})
			sts = append(sts, st)
		}
		adv, ret, err := rl.GAE(gc, a.Reward.Reward, gae.Gamma, gae.Lambda)
		if err != nil {
			return nil, 0, Bad(err)
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

// valueStep runs one Adam step of the clipped value loss over every
// chunk, anchored on the chunks' pre-update values, and returns the loss.
func (r *Reference) valueStep(ctx context.Context, critic *moe.Model, opt *moe.Adam, b *Batch, st []*chunkState) (float64, error) {
	var vs rl.ValueStats
	for _, c := range st {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if len(c.ids) < 2 {
			continue
		}
		pass, err := critic.Forward(c.ids, moe.ForwardOptions{})
		if err != nil {
			return 0, Bad(err)
		}
		v, err := rl.ActionValues(c.c.Tokens.LossMask, pass.Values)
		if err != nil {
			return 0, Bad(err)
		}
		g, err := rl.ValueGrad(&vs, c.c.Tokens.LossMask, v, c.vPre, c.ret, r.Opt.Critic.ValueClip, b.Actions)
		if err != nil {
			return 0, Bad(err)
		}
		// Action t's value is the head's output at position t−1.
		dv := make([]float32, len(pass.Values))
		copy(dv, g[1:])
		if err := critic.Backward(pass, nil, dv); err != nil {
			return 0, err
		}
	}
	opt.Update(r.Opt.Critic.MaxGradNorm)
	return vs.MeanLoss(), nil
}
