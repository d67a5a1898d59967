package trainer

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/rl"
	"github.com/t1pipe/t1/schemas"
)

// TrainActor loads the policy, runs Opt.Actor.Epochs Adam steps of
// token-level PPO over the whole batch and saves the new checkpoint (with
// its optimiser state) under job.Out.
//
// The ratio's denominator is the policy's own log-prob before the update,
// computed by the trainer with the same routing as every later forward;
// the sampler's log-probs only measure the train-vs-sampling gap. With
// replay on, every forward replays the sampler's routing for the tokens
// it covers.
func (r *Reference) TrainActor(ctx context.Context, job ActorJob) (*ActorResult, error) {
	if err := distinct(job.Policy, job.Out); err != nil {
		return nil, err
	}
	b, err := r.batch(ctx, job.Batch, job.Manifest)
	if err != nil {
		return nil, err
	}
	ck, err := LoadCheckpoint(ctx, r.Store, job.Policy)
	if err != nil {
		return nil, err
	}
	m := ck.Model
	if err := PolicyFits(m.Cfg, b.Manifest.Model); err != nil {
		return nil, Bad(fmt.Errorf("checkpoint %s: %w", job.Policy, err))
	}
	opt := ck.Optimizer
	if opt == nil {
		opt = moe.NewAdam(m, r.Opt.Actor.Adam)
	}
	// The learning rate is the configured constant, whatever the
	// checkpoint's optimiser was saved with.
	opt.Cfg = r.Opt.Actor.Adam
	met, err := r.update(ctx, m, opt, b)
	if err != nil {
		return nil, err
	}
	out := &moe.Checkpoint{Model: m, Tokenizer: ck.Tokenizer, Optimizer: opt, Meta: map[string]string{"policy_version": strconv.FormatInt(job.Version, 10)}}
	if err := out.Save(ctx, r.Store, job.Out); err != nil {
		return nil, fmt.Errorf("trainer: save %s: %w", job.Out, err)
	}
	return &ActorResult{Checkpoint: job.Out, Metrics: met}, nil
}

// batch returns b, or the batch of m loaded when b is nil.
func (r *Reference) batch(ctx context.Context, b *Batch, m *schemas.BatchManifest) (*Batch, error) {
	if b != nil {
		return b, nil
	}
	return LoadBatch(ctx, r.Store, m)
}

type prepared struct {
	c       *Chunk
	ids     []int
	loss    []bool
	opt     moe.ForwardOptions // replayed routing and the sampling temperature
	oldLP   []float32          // trainer's pre-update log-prob per token
	adv     []float32
	sampled []float32
}

func (r *Reference) update(ctx context.Context, m *moe.Model, opt *moe.Adam, b *Batch) (ActorMetrics, error) {
	o := r.Opt.Actor
	met := ActorMetrics{Replay: o.Replay}
	if b.Actions == 0 {
		return met, Bad(errors.New("trainer: the batch has no loss tokens"))
	}
	var chunks []*prepared
	for _, c := range b.Chunks() {
		if c.Values == nil {
			return met, Bad(fmt.Errorf("trainer: task %s attempt %d chunk %d has no values (the critic has not run)", c.Tokens.TaskID, c.Tokens.Attempt, c.Tokens.Chunk))
		}
		p := &prepared{c: c, ids: c.IDs(), loss: c.Tokens.LossMask, adv: c.Values.Advantages, sampled: c.Tokens.LogProbs,
			opt: moe.ForwardOptions{Temperature: float64(c.Tokens.Temperature)}}
		if len(p.ids) < 2 {
			continue
		}
		if o.Replay {
			// The last token's row only repeats the one before; replaying
			// the sampler's own T−1 rows leaves it live, which no log-prob
			// depends on.
			rt := c.Routing.Slice(0, len(p.ids)-1)
			p.opt.Replay = &rt
		}
		chunks = append(chunks, p)
	}
	n := b.Actions
	met.Actions = int64(n)
	var gap rl.GapStats
	var mis rl.Mismatch
	var lossSum, normSum float64
	for epoch := 0; epoch < o.Epochs; epoch++ {
		var ps rl.PolicyStats
		for _, p := range chunks {
			if err := ctx.Err(); err != nil {
				return met, err
			}
			pass, err := m.Forward(p.ids, p.opt)
			if err != nil {
				return met, Bad(fmt.Errorf("trainer: task %s attempt %d chunk %d: %w", p.c.Tokens.TaskID, p.c.Tokens.Attempt, p.c.Tokens.Chunk, err))
			}
			lp, err := rl.ActionLogProbs(p.loss, pass.LogProbs)
			if err != nil {
				return met, Bad(err)
			}
			if epoch == 0 {
				p.oldLP = lp
				gap.Add(p.loss, lp, p.sampled)
				mis.Add(moe.CompareRouting(p.c.Routing.Slice(0, len(p.ids)-1), pass.Routing.Slice(0, len(p.ids)-1)))
				for t, l := range p.loss {
					if l && int32(pass.IDs[t]) != p.c.Tokens.TokenIDs[t] {
						met.LossDrift++
					}
				}
			}
			g, err := rl.PolicyGrad(&ps, p.loss, lp, p.oldLP, p.adv, o.Clip, n)
			if err != nil {
				return met, Bad(err)
			}
			if err := m.Backward(pass, g[1:], nil); err != nil {
				return met, err
			}
		}
		lossSum += ps.MeanLoss()
		normSum += opt.Update(o.MaxGradNorm)
		met.Steps++
	}
	// How far the update moved the policy, over every action.
	var after rl.PolicyStats
	for _, p := range chunks {
		pass, err := m.Forward(p.ids, p.opt)
		if err != nil {
			return met, err
		}
		lp, _ := rl.ActionLogProbs(p.loss, pass.LogProbs)
		if _, err := rl.PolicyGrad(&after, p.loss, lp, p.oldLP, p.adv, o.Clip, n); err != nil {
			return met, err
		}
	}
	met.PolicyLoss = lossSum / float64(met.Steps)
	met.GradNorm = normSum / float64(met.Steps)
	met.ClipFraction = after.ClipFraction()
	met.ApproxKL = after.ApproxKL()
	met.LogProbGap, met.LogProbGapMax = gap.Mean(), gap.Max
	met.RoutingMismatches, met.RoutingSets, met.MismatchRate = int64(mis.Mismatches), int64(mis.Sets), mis.Rate()
	return met, nil
}
