package trainer

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/t1pipe/t1/infra/store"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/rl"
	"github.com/t1pipe/t1/schemas"
)

// Trainer runs one PPO actor update over a batch whose value files are
// present. On success the new policy's checkpoint exists at the location
// the Result names; on failure the job's policy stays current (Train
// never writes over Job.Policy).
type Trainer interface {
	Train(ctx context.Context, job Job) (*Result, error)
}

// Job is one actor update.
type Job struct {
	Manifest *schemas.BatchManifest
	// Batch, when set, is the manifest already loaded (the reference
	// backend then skips reading it again).
	Batch *Batch
	// Policy is the object-store prefix of the current policy checkpoint.
	Policy string
	// Out is the object-store prefix the new checkpoint should go to.
	Out string
	// Version is the new policy version (recorded in the checkpoint).
	Version int64
}

// Result is what an update produced.
type Result struct {
	// Checkpoint is where the new policy is: an object-store prefix, or,
	// from an external trainer, a local directory.
	Checkpoint string  `json:"checkpoint"`
	Metrics    Metrics `json:"metrics"`
}

// Metrics describe one actor update. An external trainer reports the same
// fields in its result file.
type Metrics struct {
	// Steps is the number of optimiser steps, Actions the loss tokens.
	Steps   int   `json:"steps"`
	Actions int64 `json:"actions"`
	// PolicyLoss is the clipped surrogate averaged over the epochs' forwards.
	PolicyLoss float64 `json:"policy_loss"`
	// ClipFraction and ApproxKL compare the updated policy with the policy
	// before the update, over every action.
	ClipFraction float64 `json:"clip_fraction"`
	ApproxKL     float64 `json:"approx_kl"`
	// GradNorm is the mean global gradient norm before clipping.
	GradNorm float64 `json:"grad_norm"`
	// LogProbGap is the masked, token-weighted mean |train − sampled|
	// log-prob of the policy before the update; LogProbGapMax its largest.
	LogProbGap    float64 `json:"logprob_gap"`
	LogProbGapMax float64 `json:"logprob_gap_max"`
	// RoutingMismatches counts (token, layer) sets where the training
	// forward's routing (live with replay off, the replayed one with it
	// on) differs from the sampler's, out of RoutingSets.
	RoutingMismatches int64   `json:"routing_mismatches"`
	RoutingSets       int64   `json:"routing_sets"`
	MismatchRate      float64 `json:"mismatch_rate"`
	// LossDrift counts loss tokens whose ids differ between the tokens
	// table and what the trainer trained on; anything but 0 is a bug.
	LossDrift int64 `json:"loss_drift"`
	Replay    bool  `json:"replay"`
}

// Options configure the reference backend.
type Options struct {
	Epochs int     // optimiser steps over the whole batch; default 1
	Clip   float64 // PPO ε, symmetric; default 0.2
	// Adam is the optimiser, at a constant learning rate.
	Adam moe.AdamConfig
	// MaxGradNorm clips the global gradient norm (0: no clipping).
	MaxGradNorm float64
	// Replay turns rollout routing replay (R³) on.
	Replay bool
}

func (o Options) withDefaults() Options {
	if o.Epochs <= 0 {
		o.Epochs = 1
	}
	if o.Clip <= 0 {
		o.Clip = 0.2
	}
	if o.Adam == (moe.AdamConfig{}) {
		o.Adam = moe.DefaultAdam()
	}
	return o
}

// Reference trains the in-process reference MoE.
type Reference struct {
	Store store.ObjectStore
	Opt   Options
}

// NewReference returns the in-process backend.
func NewReference(st store.ObjectStore, opt Options) *Reference {
	return &Reference{Store: st, Opt: opt.withDefaults()}
}

// Train loads the policy, runs Opt.Epochs Adam steps of token-level PPO
// over the whole batch and saves the new checkpoint (with its optimiser
// state) under job.Out.
//
// The ratio's denominator is the policy's own log-prob before the update,
// computed by the trainer with the same routing as every later forward;
// the sampler's log-probs only measure the train-vs-sampling gap. With
// replay on, every forward replays the sampler's routing for the tokens
// it covers.
func (r *Reference) Train(ctx context.Context, job Job) (*Result, error) {
	if job.Policy == "" || job.Out == "" || job.Policy == job.Out {
		return nil, fmt.Errorf("trainer: policy %q and out %q must be distinct prefixes", job.Policy, job.Out)
	}
	b := job.Batch
	if b == nil {
		var err error
		if b, err = LoadBatch(ctx, r.Store, job.Manifest); err != nil {
			return nil, err
		}
	}
	ck, err := LoadCheckpoint(ctx, r.Store, job.Policy)
	if err != nil {
		return nil, err
	}
	m := ck.Model
	d := b.Manifest.Model
	if m.Cfg.Vocab < d.Vocab || m.Cfg.Layers != d.Layers || m.Cfg.TopK != d.TopK || m.Cfg.Experts != d.Experts {
		return nil, Bad(fmt.Errorf("checkpoint %s has vocab %d, %d layers, top-%d of %d experts; the batch was sampled from vocab %d, %d layers, top-%d of %d",
			job.Policy, m.Cfg.Vocab, m.Cfg.Layers, m.Cfg.TopK, m.Cfg.Experts, d.Vocab, d.Layers, d.TopK, d.Experts))
	}
	opt := ck.Optimizer
	if opt == nil {
		opt = moe.NewAdam(m, r.Opt.Adam)
	}
	// The learning rate is the configured constant, whatever the
	// checkpoint's optimiser was saved with.
	opt.Cfg = r.Opt.Adam
	met, err := r.update(ctx, m, opt, b)
	if err != nil {
		return nil, err
	}
	out := &moe.Checkpoint{Model: m, Tokenizer: ck.Tokenizer, Optimizer: opt, Meta: map[string]string{"policy_version": strconv.FormatInt(job.Version, 10)}}
	if err := out.Save(ctx, r.Store, job.Out); err != nil {
		return nil, fmt.Errorf("trainer: save %s: %w", job.Out, err)
	}
	return &Result{Checkpoint: job.Out, Metrics: met}, nil
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

func (r *Reference) update(ctx context.Context, m *moe.Model, opt *moe.Adam, b *Batch) (Metrics, error) {
	met := Metrics{Replay: r.Opt.Replay}
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
		if r.Opt.Replay {
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
	for epoch := 0; epoch < r.Opt.Epochs; epoch++ {
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
				used := pass.Routing.Slice(0, len(p.ids)-1)
				mis.Add(p.c.Routing.Slice(0, len(p.ids)-1), used)
				for t, l := range p.loss {
					if l && int32(pass.IDs[t]) != p.c.Tokens.TokenIDs[t] {
						met.LossDrift++
					}
				}
			}
			g, err := rl.PolicyGrad(&ps, p.loss, lp, p.oldLP, p.adv, r.Opt.Clip, n)
			if err != nil {
				return met, Bad(err)
			}
			if err := m.Backward(pass, g[1:], nil); err != nil {
				return met, err
			}
		}
		lossSum += ps.MeanLoss()
		normSum += m.ClipGradNorm(r.Opt.MaxGradNorm)
		opt.Step()
		m.ZeroGrad()
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
		if _, err := rl.PolicyGrad(&after, p.loss, lp, p.oldLP, p.adv, r.Opt.Clip, n); err != nil {
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
