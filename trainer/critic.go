package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/checkpoint"
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
		return nil, batch.Bad(fmt.Errorf("batch %s iteration %d has no loss tokens", m.Run, m.Iteration))
	}
	model, opt, err := r.critic(ctx, job.Critic, job.Policy)
	if err != nil {
		return nil, err
	}
	if err := checkpoint.CriticFits(model.Cfg, m.Model); err != nil {
		return nil, batch.Bad(err)
	}
	o := r.Opt.Critic
	res := &CriticResult{Checkpoint: job.Out}
	// One forward per step: the pass that measures the critic is the one
	// its next step back-propagates.
	cur, err := criticForward(ctx, model, b, job.GAE)
	if err != nil {
		return nil, err
	}
	if (job.Critic == "" || job.Fresh) && o.WarmupSteps > 0 {
		res.Metrics.Warmup = true
		if !cur.rewardsVary {
			// Every attempt earned the same: fitting the returns teaches
			// the critic nothing the update could use.
			res.Metrics.WarmupEnd = WarmupNoVariance
		}
		for step := 0; step < o.WarmupSteps && cur.rewardsVary; step++ {
			if cur.ev >= o.WarmupEV {
				res.Metrics.WarmupEnd = WarmupReached
				break
			}
			loss, err := r.valueBackward(ctx, model, opt, b, cur, cur.states)
			if err != nil {
				return nil, err
			}
			res.Metrics.WarmupSteps++
			r.Opt.Log.Debug("critic warm-up", "run", m.Run, "iteration", m.Iteration, "step", step, "explained_variance", cur.ev, "value_loss", loss)
			if cur, err = criticForward(ctx, model, b, job.GAE); err != nil {
				return nil, err
			}
		}
		if res.Metrics.WarmupEnd == "" {
			res.Metrics.WarmupEnd = WarmupSteps
			if cur.ev >= o.WarmupEV {
				res.Metrics.WarmupEnd = WarmupReached
			}
		}
	}
	pre := cur.states
	res.Metrics.ExplainedVariance = cur.ev
	for _, c := range pre {
		t := c.c.Tokens
		res.Values = append(res.Values, batch.ChunkValues{TaskID: t.TaskID, Attempt: t.Attempt, Chunk: t.Chunk, Values: c.vPre, Advantages: c.adv, Returns: c.ret})
	}
	for e := range o.Epochs {
		if e > 0 {
			if cur, err = criticForward(ctx, model, b, job.GAE); err != nil {
				return nil, err
			}
		}
		if res.Metrics.ValueLoss, err = r.valueBackward(ctx, model, opt, b, cur, pre); err != nil {
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
// configured settings, or, when prefix is "", makes a fresh one: the
// policy's backbone under policy with a zero score head, or a seeded
// critic when that is "" too.
func (r *Reference) critic(ctx context.Context, prefix, policy string) (*moe.Model, *moe.Adam, error) {
	o := r.Opt.Critic
	if prefix == "" && policy != "" {
		ck, err := checkpoint.LoadPolicy(ctx, r.Store, policy)
		if err != nil {
			return nil, nil, err
		}
		c := ck.Model.Critic()
		return c, moe.NewAdam(c, o.Adam), nil
	}
	if prefix == "" {
		m, err := moe.NewCritic(o.Model)
		if err != nil {
			return nil, nil, batch.Bad(fmt.Errorf("critic model: %w", err))
		}
		return m, moe.NewAdam(m, o.Adam), nil
	}
	ck, err := checkpoint.Load(ctx, r.Store, prefix)
	if err != nil {
		return nil, nil, err
	}
	if ck.Model.Head != moe.ScoreHead {
		return nil, nil, batch.Bad(fmt.Errorf("critic %s is a policy (%s), not a critic (%s)", prefix, moe.Architecture, moe.CriticArchitecture))
	}
	opt := ck.Optimizer
	if opt == nil {
		opt = moe.NewAdam(ck.Model, o.Adam)
	}
	opt.Cfg = o.Adam
	return ck.Model, opt, nil
}

// chunkState is one chunk's view at one pass of the critic.
type chunkState struct {
	c              *batch.Chunk
	ids            []int
	pass           *moe.Pass // nil for a chunk too short to train on
	vPre, adv, ret []float32
}

// criticPass is the critic's forward over a batch: every chunk's action
// values, GAE advantages and returns, the explained variance of the
// values against the returns, and the passes a value step
// back-propagates.
type criticPass struct {
	states      []*chunkState
	ev          float64
	rewardsVary bool
}

func criticForward(ctx context.Context, critic *moe.Model, b *batch.Batch, gae GAE) (*criticPass, error) {
	out := &criticPass{}
	var mom rl.Moments
	var group []float64
	if gae.Baseline == BaselineGroup {
		rewards, tasks := make([]float64, len(b.Attempts)), make([]string, len(b.Attempts))
		for i, a := range b.Attempts {
			rewards[i], tasks[i] = a.Reward.Reward, a.TaskID
		}
		var err error
		if group, err = rl.GroupBaseline(rewards, tasks); err != nil {
			return nil, batch.Bad(err)
		}
	}
	for ai, a := range b.Attempts {
		if a.Reward.Reward != b.Attempts[0].Reward.Reward {
			out.rewardsVary = true
		}
		var gc []rl.Chunk
		var sts []*chunkState
		for _, c := range a.Chunks {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			st := &chunkState{c: c, ids: c.IDs()}
			st.vPre = make([]float32, len(st.ids))
			if len(st.ids) > 0 {
				p, err := critic.Forward(st.ids, moe.ForwardOptions{})
				if err != nil {
					return nil, batch.Bad(fmt.Errorf("task %s attempt %d chunk %d: critic: %w", a.TaskID, a.Attempt, c.Tokens.Chunk, err))
				}
				if st.vPre, err = rl.ActionValues(c.Tokens.LossMask, p.Values); err != nil {
					return nil, batch.Bad(err)
				}
				if len(st.ids) >= 2 {
					st.pass = p
				}
			}
			gc = append(gc, rl.Chunk{Loss: c.Tokens.LossMask, Values: st.vPre})
			sts = append(sts, st)
		}
		adv, ret, err := rl.GAE(gc, a.Reward.Reward, gae.Gamma, gae.Lambda)
		if err != nil {
			return nil, batch.Bad(err)
		}
		for i, st := range sts {
			st.adv, st.ret = adv[i], ret[i]
			if group != nil {
				for t, l := range gc[i].Loss {
					if l {
						st.adv[t] = float32(group[ai])
					}
				}
			}
			mom.Add(gc[i].Loss, st.ret, st.vPre)
		}
		out.states = append(out.states, sts...)
	}
	out.ev = mom.ExplainedVariance()
	if math.IsNaN(out.ev) {
		return nil, errors.New("critic: explained variance is NaN")
	}
	return out, nil
}

// valueBackward runs one Adam step of the clipped value loss over the
// passes of cur, anchored on the values and returns of anchor (the
// pre-update pass, chunk for chunk), and returns the loss.
func (r *Reference) valueBackward(ctx context.Context, critic *moe.Model, opt *moe.Adam, b *batch.Batch, cur *criticPass, anchor []*chunkState) (float64, error) {
	if len(cur.states) != len(anchor) {
		return 0, fmt.Errorf("critic: %d chunks against %d anchors", len(cur.states), len(anchor))
	}
	var vs rl.ValueStats
	for i, c := range cur.states {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if c.pass == nil {
			continue
		}
		g, err := rl.ValueGrad(&vs, c.c.Tokens.LossMask, c.vPre, anchor[i].vPre, anchor[i].ret, r.Opt.Critic.ValueClip, b.Actions)
		if err != nil {
			return 0, batch.Bad(err)
		}
		// Action t's value is the head's output at position t−1.
		dv := make([]float32, len(c.pass.Values))
		copy(dv, g[1:])
		if err := critic.Backward(c.pass, nil, dv); err != nil {
			return 0, err
		}
		c.pass = nil // a pass is back-propagated once
	}
	norm := opt.Update(r.Opt.Critic.MaxGradNorm)
	if l := vs.MeanLoss(); math.IsNaN(l) || math.IsInf(l, 0) || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return 0, batch.Bad(fmt.Errorf("%w: critic value loss %v, gradient norm %v", ErrDivergent, l, norm))
	}
	return vs.MeanLoss(), nil
}
