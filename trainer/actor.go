package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/rl"
	"github.com/t1pipe/t1/schemas"
)

// TrainActor loads the policy, runs token-level PPO over the batch
// (Opt.Actor.Epochs passes, each of Opt.Actor.Minibatches Adam steps over
// the chunks in a seeded order) and saves the new checkpoint (with its
// optimiser state) under job.Out. A batch whose advantages are all 0 is
// skipped (Metrics.Skipped says why) and the policy saved unchanged; a
// divergent step fails the job with ErrDivergent and saves nothing.
//
// The ratio's denominator is the policy's own log-prob before the update,
// computed by the trainer with the same routing as every later forward;
// the sampler's log-probs measure the train-vs-sampling gap and, with
// Opt.Actor.ImportanceCap, weight each action as the behaviour policy's
// (the decoupled objective of a stale batch). With
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
	ck, err := checkpoint.LoadPolicy(ctx, r.Store, job.Policy)
	if err != nil {
		return nil, err
	}
	m := ck.Model
	if err := checkpoint.PolicyFits(m.Cfg, b.Manifest.Model); err != nil {
		return nil, batch.Bad(fmt.Errorf("checkpoint %s: %w", job.Policy, err))
	}
	opt := ck.Optimizer
	if opt == nil {
		opt = moe.NewAdam(m, r.Opt.Actor.Adam)
	}
	// The learning rate is the configured constant, whatever the
	// checkpoint's optimiser was saved with.
	opt.Cfg = r.Opt.Actor.Adam
	met, err := r.update(ctx, m, opt, b, job.Version)
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
func (r *Reference) batch(ctx context.Context, b *batch.Batch, m *schemas.BatchManifest) (*batch.Batch, error) {
	if b != nil {
		return b, nil
	}
	return batch.Load(ctx, r.Store, m)
}

type prepared struct {
	c       *batch.Chunk
	ids     []int
	loss    []bool
	opt     moe.ForwardOptions // replayed routing and the sampling temperature
	oldLP   []float32          // trainer's pre-update log-prob per token
	adv     []float32
	sampled []float32
	weight  []float32 // behaviour importance weights (ImportanceCap), or nil
	// The pre-update policy routing on its own: its action log-probs and
	// experts, for LiveKL and ExpertsSwitched.
	liveLP      []float32
	liveRouting moe.Routing
}

func (r *Reference) update(ctx context.Context, m *moe.Model, opt *moe.Adam, b *batch.Batch, seed int64) (ActorMetrics, error) {
	o := r.Opt.Actor
	met := ActorMetrics{Replay: o.Replay}
	if b.Actions == 0 {
		return met, batch.Bad(errors.New("trainer: the batch has no loss tokens"))
	}
	var chunks []*prepared
	for _, c := range b.Chunks() {
		if c.Values == nil {
			return met, batch.Bad(fmt.Errorf("trainer: task %s attempt %d chunk %d has no values (the critic has not run)", c.Tokens.TaskID, c.Tokens.Attempt, c.Tokens.Chunk))
		}
		p := &prepared{c: c, ids: c.IDs(), loss: c.Tokens.LossMask, adv: slices.Clone(c.Values.Advantages), sampled: c.Tokens.LogProbs,
			opt: moe.ForwardOptions{Temperature: float64(c.Tokens.Temperature)}}
		if len(p.ids) < 2 {
			continue
		}
		if len(p.adv) != len(p.loss) {
			return met, batch.Bad(fmt.Errorf("trainer: task %s attempt %d chunk %d: %d advantages for %d tokens", c.Tokens.TaskID, c.Tokens.Attempt, c.Tokens.Chunk, len(p.adv), len(p.loss)))
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
	met.Actions = int64(b.Actions)
	signal := false
	for _, p := range chunks {
		for t, l := range p.loss {
			signal = signal || (l && p.adv[t] != 0)
		}
	}
	if signal {
		loss, adv := make([][]bool, len(chunks)), make([][]float32, len(chunks))
		for i, p := range chunks {
			loss[i], adv[i] = p.loss, p.adv
		}
		// Weighing before standardising keeps a group baseline's
		// advantages centred: each attempt's sum is then its
		// group-relative reward, and those sum to 0 over every group.
		if o.WeighAttempts {
			attempt := make([]int, len(chunks))
			type key struct {
				task    string
				attempt int32
			}
			ids := map[key]int{}
			for i, p := range chunks {
				k := key{p.c.Tokens.TaskID, p.c.Tokens.Attempt}
				if _, ok := ids[k]; !ok {
					ids[k] = len(ids)
				}
				attempt[i] = ids[k]
			}
			if err := rl.WeighAttempts(attempt, loss, adv); err != nil {
				return met, batch.Bad(err)
			}
		}
		if o.NormalizeAdvantages {
			if _, err := rl.Whiten(loss, adv); err != nil {
				return met, batch.Bad(err)
			}
		}
	}
	// The ratio's denominator: the policy before any step, with the same
	// routing as every later forward.
	var gap rl.GapStats
	var mis rl.Mismatch
	for _, p := range chunks {
		if err := ctx.Err(); err != nil {
			return met, err
		}
		pass, err := m.Forward(p.ids, p.opt)
		if err != nil {
			return met, batch.Bad(fmt.Errorf("trainer: task %s attempt %d chunk %d: %w", p.c.Tokens.TaskID, p.c.Tokens.Attempt, p.c.Tokens.Chunk, err))
		}
		if p.oldLP, err = rl.ActionLogProbs(p.loss, pass.LogProbs); err != nil {
			return met, batch.Bad(err)
		}
		gap.Add(p.loss, p.oldLP, p.sampled)
		p.liveLP, p.liveRouting = p.oldLP, pass.Routing // live unless replayed (below)
		mis.Add(moe.CompareRouting(p.c.Routing.Slice(0, len(p.ids)-1), pass.Routing.Slice(0, len(p.ids)-1)))
		for t, l := range p.loss {
			if l && int32(pass.IDs[t]) != p.c.Tokens.TokenIDs[t] {
				met.LossDrift++
			}
		}
	}
	met.LogProbGap, met.LogProbGapMax = gap.Mean(), gap.Max
	met.Staleness = b.Manifest.Staleness
	if o.ImportanceCap > 0 {
		var bs rl.BehaviourStats
		for _, p := range chunks {
			var err error
			if p.weight, err = rl.BehaviourWeights(&bs, p.loss, p.oldLP, p.sampled, o.ImportanceCap); err != nil {
				return met, batch.Bad(err)
			}
		}
		met.BehaviourKL, met.Truncated = bs.KLMean(), bs.TruncatedFraction()
	}
	met.RoutingMismatches, met.RoutingSets, met.MismatchRate = int64(mis.Mismatches), int64(mis.Sets), mis.Rate()
	// Without a non-zero advantage every gradient is 0: nothing to learn,
	// so no step is taken and the policy stays as it was. The pass above
	// still measured how well the sampler's log-probs and routing match
	// this policy's, which is what shows a stale engine.
	if !signal {
		met.Skipped = "every advantage is 0"
		return met, nil
	}
	for _, p := range chunks {
		if p.opt.Replay == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return met, err
		}
		var err error
		if p.liveLP, p.liveRouting, err = liveForward(m, p); err != nil {
			return met, err
		}
	}
	var before [][]float32
	var restoreOpt func()
	if o.MaxLiveKL > 0 {
		before, restoreOpt = moe.CloneData(m.W.Tensors), opt.Mark()
	}
	// Epochs × minibatches steps; each epoch visits the chunks in an order
	// drawn from the job's seed, so a rerun trains identically.
	rng := rand.New(rand.NewPCG(uint64(seed), 0x70706f)) // "ppo"
	var ps rl.PolicyStats
	var lossSum, normSum float64
	for epoch := 0; epoch < o.Epochs; epoch++ {
		order := rng.Perm(len(chunks))
		for _, mb := range minibatches(order, o.Minibatches) {
			n := 0
			for _, i := range mb {
				for _, l := range chunks[i].loss {
					if l {
						n++
					}
				}
			}
			if n == 0 {
				continue
			}
			var step rl.PolicyStats
			for _, i := range mb {
				if err := ctx.Err(); err != nil {
					return met, err
				}
				p := chunks[i]
				pass, err := m.Forward(p.ids, p.opt)
				if err != nil {
					return met, batch.Bad(fmt.Errorf("trainer: task %s attempt %d chunk %d: %w", p.c.Tokens.TaskID, p.c.Tokens.Attempt, p.c.Tokens.Chunk, err))
				}
				lp, err := rl.ActionLogProbs(p.loss, pass.LogProbs)
				if err != nil {
					return met, batch.Bad(err)
				}
				g, err := rl.DecoupledPolicyGrad(&step, p.loss, lp, p.oldLP, p.adv, p.weight, o.Clip, n)
				if err != nil {
					return met, batch.Bad(err)
				}
				if err := m.Backward(pass, g[1:], nil); err != nil {
					return met, err
				}
			}
			norm := opt.Update(o.MaxGradNorm)
			if l := step.MeanLoss(); math.IsNaN(l) || math.IsInf(l, 0) || math.IsNaN(norm) || math.IsInf(norm, 0) {
				return met, batch.Bad(fmt.Errorf("%w: epoch %d step %d: loss %v, gradient norm %v", ErrDivergent, epoch, met.Steps, l, norm))
			}
			lossSum += step.MeanLoss()
			normSum += norm
			ps.Tokens, ps.Loss, ps.KL, ps.Clipped = ps.Tokens+step.Tokens, ps.Loss+step.Loss, ps.KL+step.KL, ps.Clipped+step.Clipped
			met.Steps++
		}
	}
	if met.Steps == 0 {
		return met, batch.Bad(errors.New("trainer: no minibatch has a loss token"))
	}
	var err error
	if met.LiveKL, met.ExpertsSwitched, err = liveChange(ctx, m, chunks); err != nil {
		return met, err
	}
	if o.MaxLiveKL > 0 && met.LiveKL > o.MaxLiveKL {
		if err := backtrack(ctx, m, before, restoreOpt, chunks, o.MaxLiveKL, &met); err != nil {
			return met, err
		}
	}
	met.PolicyLoss = lossSum / float64(met.Steps)
	met.GradNorm = normSum / float64(met.Steps)
	met.ClipFraction = ps.ClipFraction()
	met.ApproxKL = ps.ApproxKL()
	return met, nil
}

// liveChange compares m with the policy before the update as the next
// rollout will sample it, each routing on its own: the k3 KL over the
// batch's actions and the fraction of expert sets that switched.
func liveChange(ctx context.Context, m *moe.Model, chunks []*prepared) (kl, switchedRate float64, err error) {
	var live rl.PolicyStats
	var switched rl.Mismatch
	for _, p := range chunks {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		lp, routing, err := liveForward(m, p)
		if err != nil {
			return 0, 0, err
		}
		live.AddKL(p.loss, p.liveLP, lp)
		switched.Add(moe.CompareRouting(p.liveRouting.Slice(0, len(p.ids)-1), routing.Slice(0, len(p.ids)-1)))
	}
	return live.ApproxKL(), switched.Rate(), nil
}

// maxBacktracks bounds the trust region's halvings: a step scaled to
// 1/32 that still moves the sampled policy too far is not taken.
const maxBacktracks = 5

// backtrack halves the update's step (the parameters' move from before)
// until the policy as sampled moves by at most bound, measured as
// liveChange measures it. Replay makes the update's ratios, clip and
// ApproxKL blind to experts that switch; the live measure is not. When
// no scale down to 1/2^maxBacktracks is within bound the policy and the
// optimiser (restoreOpt) are restored and met.Skipped says why.
func backtrack(ctx context.Context, m *moe.Model, before [][]float32, restoreOpt func(), chunks []*prepared, bound float64, met *ActorMetrics) error {
	after := moe.CloneData(m.W.Tensors)
	scale := float32(1)
	for met.Backtracks < maxBacktracks {
		scale /= 2
		met.Backtracks++
		for i, t := range m.W.Tensors {
			b, a := before[i], after[i]
			for j := range t.Data {
				t.Data[j] = b[j] + scale*(a[j]-b[j])
			}
		}
		var err error
		if met.LiveKL, met.ExpertsSwitched, err = liveChange(ctx, m, chunks); err != nil {
			return err
		}
		if met.LiveKL <= bound {
			return nil
		}
	}
	for i, t := range m.W.Tensors {
		copy(t.Data, before[i])
	}
	restoreOpt()
	met.Skipped = fmt.Sprintf("the step scaled to 1/%d still moved the policy as sampled by KL %.3g, above training.max_live_kl %g", 1<<maxBacktracks, met.LiveKL, bound)
	met.LiveKL, met.ExpertsSwitched = 0, 0
	return nil
}

// ErrDivergent marks an update whose loss or gradient stopped being a
// finite number; the update fails and the policy it started from stays.
var ErrDivergent = errors.New("trainer: divergent update")

// minibatches splits order into k parts of near-equal size (k ≤ 1 or
// k ≥ len(order): one part per element at most).
func minibatches(order []int, k int) [][]int {
	k = max(1, min(k, len(order)))
	out := make([][]int, 0, k)
	for i := range k {
		lo, hi := i*len(order)/k, (i+1)*len(order)/k
		out = append(out, order[lo:hi])
	}
	return out
}

// liveForward is m's action log-probs and experts for p's tokens with
// every expert chosen by m's own routers, as the sampler chooses them.
func liveForward(m *moe.Model, p *prepared) ([]float32, moe.Routing, error) {
	pass, err := m.Forward(p.ids, moe.ForwardOptions{Temperature: p.opt.Temperature})
	if err != nil {
		return nil, moe.Routing{}, batch.Bad(fmt.Errorf("trainer: task %s attempt %d chunk %d: %w", p.c.Tokens.TaskID, p.c.Tokens.Attempt, p.c.Tokens.Chunk, err))
	}
	lp, err := rl.ActionLogProbs(p.loss, pass.LogProbs)
	if err != nil {
		return nil, moe.Routing{}, batch.Bad(err)
	}
	return lp, pass.Routing, nil
}
