package trainer

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// Trainer runs the three updates of a run: the PPO actor update, the
// critic's iteration (pre-update values, advantages and returns, then the
// value update) and supervised fine-tuning. Every job names the
// checkpoint it starts from and the prefix its new checkpoint should go
// to; on success the new checkpoint exists where the result says, and on
// failure the starting checkpoint is untouched (no job writes over it).
// Errors caused by the input are batch.BadInputErrors (batch.IsBad).
type Trainer interface {
	TrainActor(ctx context.Context, job ActorJob) (*ActorResult, error)
	TrainCritic(ctx context.Context, job CriticJob) (*CriticResult, error)
	TrainSFT(ctx context.Context, job SFTJob) (*SFTResult, error)
}

// Kind names a job's kind in the exec protocol's job and result files.
type Kind string

// The kinds of job.
const (
	KindActor  Kind = "actor"
	KindCritic Kind = "critic"
	KindSFT    Kind = "sft"
)

// ActorJob is one PPO actor update over a batch whose value files are
// present.
type ActorJob struct {
	Manifest *schemas.BatchManifest
	// Batch, when set, is the manifest already loaded (the reference
	// backend then skips reading it again).
	Batch *batch.Batch
	// Policy is the object-store prefix of the current policy checkpoint.
	Policy string
	// Out is the object-store prefix the new checkpoint should go to.
	Out string
	// Version is the new policy version (recorded in the checkpoint).
	Version int64
}

// ActorResult is what an actor update produced.
type ActorResult struct {
	// Checkpoint is where the new policy is: an object-store prefix, or,
	// from an external trainer, a local directory.
	Checkpoint string       `json:"checkpoint"`
	Metrics    ActorMetrics `json:"metrics"`
}

// ActorMetrics describe one actor update. An external trainer reports the
// same fields in its result file.
type ActorMetrics struct {
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
	// LiveKL and ExpertsSwitched compare the updated policy with the one
	// before, each routing on its own as the next rollout samples it: the
	// k3 estimate of KL(old ‖ new) over every action, and the fraction of
	// (token, layer) expert sets that changed. Under replay the update's
	// own ratios hold the sampler's experts fixed and see neither; a step
	// that leaves ApproxKL tiny can still switch a fifth of the experts
	// and change the sampled policy by far more.
	LiveKL          float64 `json:"live_kl"`
	ExpertsSwitched float64 `json:"experts_switched"`
	// Backtracks is how many times ActorOptions.MaxLiveKL halved the
	// step; LiveKL and ExpertsSwitched are the kept step's. ClipFraction,
	// ApproxKL and PolicyLoss describe the full step.
	Backtracks int `json:"backtracks,omitzero"`
	// LossDrift counts loss tokens whose ids differ between the tokens
	// table and what the trainer trained on; anything but 0 is a bug.
	LossDrift int64 `json:"loss_drift"`
	Replay    bool  `json:"replay"`
	// Staleness is how many versions the trained policy is newer than the
	// one that sampled the batch (BatchManifest.Staleness); BehaviourKL
	// the k3 estimate of KL(behaviour ‖ proximal) over every action, the
	// sampler's policy against the trainer's before the update; Truncated
	// the fraction of actions whose importance weight
	// ActorOptions.ImportanceCap cut. The last two are measured only with
	// the decoupled objective on.
	Staleness   int64   `json:"staleness,omitzero"`
	BehaviourKL float64 `json:"behaviour_kl,omitzero"`
	Truncated   float64 `json:"truncated,omitzero"`
	// Skipped, when set, says why no step was taken (every advantage 0,
	// or a step the trust region rejected): the policy, and its
	// optimiser state, are the ones the job started from.
	Skipped string `json:"skipped,omitempty"`
}

// GAE is generalised advantage estimation's discount γ and trace decay
// λ, both in [0, 1], and the baseline the advantages are taken against.
// They belong to the job, not to a backend: the advantages they define
// are what the actor update trains on.
type GAE struct {
	Gamma  float64 `json:"gamma"`
	Lambda float64 `json:"lambda"`
	// Baseline is BaselineCritic ("" too: GAE over the critic's values)
	// or BaselineGroup (every action of an attempt gets the attempt's
	// reward minus the mean reward of its task's attempts in the batch,
	// rl.GroupBaseline). The critic is trained on its GAE returns either
	// way, so its explained variance is measured under both.
	Baseline string `json:"baseline"`
}

// The advantage baselines.
const (
	BaselineCritic = "critic"
	BaselineGroup  = "group"
)

// CriticJob is one critic iteration over a batch: the critic's values
// before its update for every chunk, GAE advantages and returns over each
// attempt's actions (package rl), then the value update on those returns.
type CriticJob struct {
	Manifest *schemas.BatchManifest
	// Batch, when set, is the manifest already loaded.
	Batch *batch.Batch
	// Critic is the object-store prefix of the current critic checkpoint;
	// "" asks for a fresh critic, which is warmed up on the batch before
	// its values are taken.
	Critic string
	// Policy, for a fresh critic, is the policy checkpoint it starts from:
	// the policy's backbone under a score head of 0 (moe.Model.Critic), as
	// warm critics usually start. "" starts from a seeded random critic of
	// Opt.Critic.Model's shape.
	Policy string
	// Fresh says that Critic is a fresh critic made for this job (the
	// seeded one the exec backend writes, keys.FreshCritic): it is warmed
	// up, with a new optimiser, as one made in place would be.
	Fresh bool
	// Out is the object-store prefix the new critic should go to, and
	// Version its version (recorded in the checkpoint).
	Out     string
	Version int64
	GAE     GAE
}

// CriticResult is what a critic iteration produced.
type CriticResult struct {
	// Checkpoint is where the new critic is (an object-store prefix or a
	// local directory).
	Checkpoint string `json:"checkpoint"`
	// Values holds every chunk of the batch once: the values the actor's
	// advantages were computed from, taken after any warm-up and before
	// the update.
	Values  []batch.ChunkValues `json:"values"`
	Metrics CriticMetrics       `json:"metrics"`
}

// CriticMetrics describe one critic iteration.
type CriticMetrics struct {
	// Steps counts the value update's optimiser steps, WarmupSteps those
	// of the warm-up before it; Warmup is whether the critic was fresh and
	// warm-up was on.
	Steps       int  `json:"steps"`
	Warmup      bool `json:"warmup"`
	WarmupSteps int  `json:"warmup_steps"`
	// WarmupEnd says why warm-up stopped: WarmupReached, WarmupSteps or
	// WarmupNoVariance; "" without warm-up.
	WarmupEnd string `json:"warmup_end,omitempty"`
	// ExplainedVariance is that of the returned values against the
	// returns; ValueLoss the value loss of the update's last step.
	ExplainedVariance float64 `json:"explained_variance"`
	ValueLoss         float64 `json:"value_loss"`
}

// Why a critic's warm-up ended.
const (
	WarmupReached    = "explained variance reached"
	WarmupSteps      = "steps spent"
	WarmupNoVariance = "rewards do not vary"
)

// SFTJob is supervised fine-tuning of a policy on token rows: the loss is
// the mean negative log-likelihood of the loss-region tokens.
type SFTJob struct {
	Run string
	// Data are tokens-table objects.
	Data []schemas.FileRef
	// Steps is the number of optimiser steps (at least 1).
	Steps int
	// Policy is the prefix of the policy to start from; Out the prefix the
	// fine-tuned policy should go to, saved without optimiser state, and
	// Version its version, one past Policy's.
	Policy  string
	Out     string
	Version int64
	// Seed, when above 0, draws the order of each pass over the
	// demonstrations (0: every pass in (task, attempt, chunk) order).
	Seed uint64
}

// SFTResult is what a fine-tuning produced.
type SFTResult struct {
	Checkpoint string     `json:"checkpoint"`
	Metrics    SFTMetrics `json:"metrics"`
}

// SFTMetrics describe one fine-tuning.
type SFTMetrics struct {
	Steps     int `json:"steps"`
	Sequences int `json:"sequences"`
	// FirstLoss and Loss are the losses the first and the last step
	// measured, each before its update.
	FirstLoss float64 `json:"first_loss"`
	Loss      float64 `json:"loss"`
}

// The backends New knows.
const (
	BackendReference = "reference"
	BackendExec      = "exec"
)

// Options select and configure a backend.
type Options struct {
	// Backend is BackendReference ("" too) or BackendExec.
	Backend string
	// Exec is the exec backend's command.
	Exec Exec
	// Reference configures the reference backend.
	Reference ReferenceOptions
}

// New returns the backend o selects: the reference trainer on st, or
// o.Exec.
func New(st store.ObjectStore, o Options) (Trainer, error) {
	switch o.Backend {
	case "", BackendReference:
		return NewReference(st, o.Reference), nil
	case BackendExec:
		if len(o.Exec.Argv) == 0 {
			return nil, fmt.Errorf("trainer: the exec backend needs a command")
		}
		e := o.Exec
		// The external trainer gets the settings the reference one would
		// train with, in each job file.
		e.Hyperparameters = o.Reference
		e.Store = st
		return &e, nil
	}
	return nil, fmt.Errorf("trainer: unknown backend %q (want %s or %s)", o.Backend, BackendReference, BackendExec)
}

// ReferenceOptions configure the reference backend's three updates.
type ReferenceOptions struct {
	Actor  ActorOptions
	Critic CriticOptions
	SFT    SFTOptions
	// Log gets the critic's warm-up steps at debug level (nil: slog's
	// default logger).
	Log *slog.Logger `json:"-"`
}

// The fine-tuning's learning-rate schedules (SFTOptions.Schedule).
const (
	ScheduleConstant = "constant"
	ScheduleCosine   = "cosine"
)

// ActorOptions configure the reference actor update.
type ActorOptions struct {
	Epochs int `json:"epochs"` // passes over the batch; default 1
	// Minibatches splits each pass into this many optimiser steps over
	// disjoint sets of chunks; default 1 (one full-batch step).
	Minibatches int     `json:"minibatches"`
	Clip        float64 `json:"clip"` // PPO ε, symmetric; default 0.2
	// NormalizeAdvantages standardises the batch's advantages (rl.Whiten)
	// before the update.
	NormalizeAdvantages bool `json:"normalize_advantages"`
	// WeighAttempts gives every attempt the same weight in the loss
	// (rl.WeighAttempts) instead of every token.
	WeighAttempts bool `json:"weigh_attempts"`
	// Adam is the optimiser, at a constant learning rate.
	Adam moe.AdamConfig `json:"adam"`
	// MaxGradNorm clips the global gradient norm (0: no clipping).
	MaxGradNorm float64 `json:"max_grad_norm"`
	// Replay turns rollout routing replay (R³) on.
	Replay bool `json:"replay"`
	// MaxLiveKL, when above 0, is a trust region on the policy as
	// sampled: an update whose LiveKL exceeds it is scaled back, halving
	// its step until it does not, and not taken when 1/32 of it still
	// does (ActorMetrics.Backtracks, Skipped).
	MaxLiveKL float64 `json:"max_live_kl,omitzero"`
	// ImportanceCap, when above 0, trains with the decoupled objective of
	// asynchronous PPO: the ratio's denominator stays the proximal policy
	// (the trainer's own before the update), and every action's term is
	// weighted by min(π_prox/π_behaviour, ImportanceCap), the sampler's
	// log-prob as the behaviour policy (rl.DecoupledPolicyGrad). 0 takes
	// the sampler's policy to be the trained one (training.max_staleness
	// 0).
	ImportanceCap float64 `json:"importance_cap,omitzero"`
}

// CriticOptions configure the reference critic.
type CriticOptions struct {
	// Model is the shape of a fresh critic (initialised from Model.Seed);
	// its vocabulary must cover the policy's.
	Model moe.Config `json:"model"`
	// Adam is the optimiser, at a constant learning rate.
	Adam moe.AdamConfig `json:"adam"`
	// ValueClip bounds how far an update moves a value from its
	// pre-update estimate in the loss (0: no clipping).
	ValueClip float64 `json:"value_clip"`
	// Epochs is the number of optimiser steps per iteration (default 1).
	Epochs int `json:"epochs"`
	// MaxGradNorm clips the gradient norm (0: no clipping).
	MaxGradNorm float64 `json:"max_grad_norm"`
	// WarmupSteps bounds the warm-up of a fresh critic; WarmupEV ends it
	// early once the explained variance reaches it.
	WarmupSteps int     `json:"warmup_steps"`
	WarmupEV    float64 `json:"warmup_ev"`
}

// SFTOptions configure the reference fine-tuning.
type SFTOptions struct {
	// Adam is the optimiser; its LR is the peak of Schedule.
	Adam moe.AdamConfig `json:"adam"`
	// Schedule is how the learning rate moves over the steps:
	// ScheduleConstant ("" too) keeps Adam.LR; ScheduleCosine decays it
	// from Adam.LR at the first step to 0 after the last, so the policy
	// ends where small steps settled it, not where the last minibatches
	// pushed it.
	Schedule string `json:"schedule,omitempty"`
	// MaxGradNorm clips the gradient norm (0: no clipping).
	MaxGradNorm float64 `json:"max_grad_norm"`
	// Batch is the number of demonstrations each step trains on, taken in
	// turn from the rows (sorted, or each pass in the order SFTJob.Seed
	// draws) so every one is seen once every ceil(n/Batch) steps; 0 or at
	// least n trains each step on all.
	Batch int `json:"batch"`
}

func (o ReferenceOptions) withDefaults() ReferenceOptions {
	if o.Actor.Minibatches <= 0 {
		o.Actor.Minibatches = 1
	}
	if o.Actor.Epochs <= 0 {
		o.Actor.Epochs = 1
	}
	if o.Actor.Clip <= 0 {
		o.Actor.Clip = 0.2
	}
	for _, a := range []*moe.AdamConfig{&o.Actor.Adam, &o.Critic.Adam, &o.SFT.Adam} {
		if *a == (moe.AdamConfig{}) {
			*a = moe.DefaultAdam()
		}
	}
	if o.Critic.Epochs <= 0 {
		o.Critic.Epochs = 1
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o
}

// Reference trains the in-process reference MoE (actor.go, critic.go,
// sft.go).
type Reference struct {
	Store store.ObjectStore
	Opt   ReferenceOptions
}

// NewReference returns the in-process backend.
func NewReference(st store.ObjectStore, opt ReferenceOptions) *Reference {
	return &Reference{Store: st, Opt: opt.withDefaults()}
}

// distinct refuses a job whose new checkpoint would go over the one it
// starts from (or nowhere).
func distinct(from, out string) error {
	if out == "" || from == out {
		return fmt.Errorf("trainer: the checkpoint %q and the new one %q must be distinct prefixes", from, out)
	}
	return nil
}
