package config

import (
	"slices"
	"strings"

	"github.com/t1pipe/t1/moe"
)

// Training configures the trainer of the critic, PPO and SFT stages
// (ARCHITECTURE.md §1.5–§1.6): settings only; the pipeline builds the trainer
// from them (trainer.New).
type Training struct {
	// Gamma and Lambda are GAE's discount and trace decay, in [0, 1].
	Gamma  float64 `yaml:"gamma"`
	Lambda float64 `yaml:"lambda"`
	// Clip is PPO's symmetric ratio clip ε; ValueClip bounds how far a
	// value may move from its pre-update estimate in the value loss (0
	// turns value clipping off).
	Clip      float64 `yaml:"clip"`
	ValueClip float64 `yaml:"value_clip"`
	// LR and CriticLR are Adam's constant learning rates.
	LR       float64 `yaml:"lr"`
	CriticLR float64 `yaml:"critic_lr"`
	// SFTLR is the learning rate of supervised initialisation; SFTBatch
	// the demonstrations each of its steps trains on (0: all of them), so
	// a step costs a slice of the pool rather than all of it.
	SFTLR    float64 `yaml:"sft_lr"`
	SFTBatch int     `yaml:"sft_batch"`
	// SFTSchedule is how the fine-tuning's learning rate moves over its
	// steps: constant, or cosine (from SFTLR down to 0 at the last step);
	// SFTWeightDecay is its AdamW decay per unit of learning rate (0: none).
	SFTSchedule    string  `yaml:"sft_schedule"`
	SFTWeightDecay float64 `yaml:"sft_weight_decay"`
	// Epochs are the actor's passes over the batch per iteration, each
	// of Minibatches optimiser steps over disjoint sets of chunks;
	// CriticEpochs the critic's optimiser steps over the whole batch.
	Epochs       int `yaml:"epochs"`
	Minibatches  int `yaml:"minibatches"`
	CriticEpochs int `yaml:"critic_epochs"`
	// NormalizeAdvantages standardises each batch's advantages before the
	// actor update, so a step's size depends neither on the reward's
	// scale nor on how far the critic is off.
	NormalizeAdvantages bool `yaml:"normalize_advantages"`
	// Baseline is what an attempt's advantages are measured against:
	// BaselineCritic (GAE over the critic's values, as PPO has it) or
	// BaselineGroup (the mean reward of the same task's attempts in the
	// batch; the critic is still trained and measured).
	Baseline string `yaml:"baseline"`
	// LossWeighting is LossPerToken (every action of the batch weighs
	// the same) or LossPerAttempt (every attempt does, however long).
	LossWeighting string `yaml:"loss_weighting"`
	// MaxGradNorm clips the global gradient norm (0: no clipping).
	MaxGradNorm float64 `yaml:"max_grad_norm"`
	// CriticInit is where a run's first critic starts: CriticFromPolicy
	// (the policy's backbone under a zero score head, as warm critics
	// usually start) or CriticFresh (a seeded random critic).
	CriticInit string `yaml:"critic_init"`
	// Replay turns rollout routing replay (R³) on in the actor update.
	Replay bool `yaml:"replay"`
	// MaxLiveKL (0: off) bounds how far one actor update may move the
	// policy as the next rollout samples it, each version routing on its
	// own: a larger step is halved until it does not, or not taken.
	// Under replay the update's clip and approximate KL cannot see the
	// experts a step switches.
	MaxLiveKL float64 `yaml:"max_live_kl" json:",omitzero"`
	// MaxStaleness (0: synchronous) lets the attempts of the next
	// MaxStaleness iterations play while the critic and PPO of the
	// current one run: iteration i samples the policy iteration
	// i−1−MaxStaleness made and trains the newest, never more than
	// MaxStaleness versions apart (ARCHITECTURE.md §1.6).
	MaxStaleness int `yaml:"max_staleness" json:",omitzero"`
	// ImportanceCap truncates the importance weight of the trainer's
	// policy before the update over the sampler's in the decoupled
	// objective a stale batch trains with (MaxStaleness above 0).
	ImportanceCap float64        `yaml:"importance_cap" json:",omitzero"`
	Warmup        CriticWarmup   `yaml:"warmup"`
	Trainer       TrainerBackend `yaml:"trainer"`
}

// CriticWarmup trains a fresh critic on the first batch before any actor
// update: at most Steps steps, ending early once the explained variance
// reaches EV.
type CriticWarmup struct {
	Steps int     `yaml:"steps"`
	EV    float64 `yaml:"ev"`
}

// TrainerBackend selects who runs the actor, critic and SFT updates.
type TrainerBackend struct {
	// Backend is reference (the in-process MoE) or exec (Command).
	Backend string `yaml:"backend"`
	// Command is the exec backend's argv, run once per job of every
	// kind; arguments may contain {job}, {kind}, {manifest}, {out},
	// {policy}, {critic}, {checkpoint} and {version} (see trainer.Exec).
	// {out} must appear: it is where the command reports the new
	// checkpoint; so must {job} or {kind}, which tell it what to do.
	Command []string `yaml:"command"`
	// Dir is the command's working directory ("" = the one t1 started in).
	Dir string `yaml:"dir"`
}

// The advantage baselines and loss weightings.
const (
	BaselineCritic = "critic"
	BaselineGroup  = "group"
	LossPerToken   = "token"
	LossPerAttempt = "attempt"
)

// The fine-tuning's learning-rate schedules (trainer.SFTOptions.Schedule
// takes them as they are).
const (
	ScheduleConstant = "constant"
	ScheduleCosine   = "cosine"
)

// The critic's starting points.
const (
	CriticFromPolicy = "policy"
	CriticFresh      = "fresh"
)

func defaultTraining() Training {
	return Training{
		Gamma: 1, Lambda: 0.95, Clip: 0.2, ValueClip: 0.2, LR: 2e-4, CriticLR: 5e-4, SFTLR: 1e-3, SFTBatch: 8, SFTSchedule: ScheduleConstant, Epochs: 2, Minibatches: 4, CriticEpochs: 1, NormalizeAdvantages: true,
		Baseline: BaselineGroup, LossWeighting: LossPerToken,
		MaxGradNorm: 1, CriticInit: CriticFromPolicy, Replay: true, MaxLiveKL: 0.02, ImportanceCap: 2, Warmup: CriticWarmup{Steps: 4, EV: 0.1},
		Trainer: TrainerBackend{Backend: "reference", Command: []string{}},
	}
}

// DecoupledCap is the actor's trainer.ActorOptions.ImportanceCap: the
// configured cap when batches may be stale, 0 (the sampler's policy is the
// trained one) in a synchronous run.
func (t Training) DecoupledCap() float64 {
	if t.MaxStaleness == 0 {
		return 0
	}
	return t.ImportanceCap
}

// Adam returns the actor's optimiser settings (Adam's betas and ε are
// fixed at moe's defaults).
func (t Training) Adam() moe.AdamConfig {
	a := moe.DefaultAdam()
	a.LR = t.LR
	return a
}

// SFTAdam returns the optimiser settings of supervised initialisation.
func (t Training) SFTAdam() moe.AdamConfig {
	a := moe.DefaultAdam()
	a.LR = t.SFTLR
	a.WeightDecay = t.SFTWeightDecay
	return a
}

// CriticAdam returns the critic's optimiser settings.
func (t Training) CriticAdam() moe.AdamConfig {
	a := moe.DefaultAdam()
	a.LR = t.CriticLR
	return a
}

func (t Training) check(bad func(path, format string, args ...any)) {
	unit := func(key string, v float64) {
		if v < 0 || v > 1 {
			bad("training."+key, "must lie in [0, 1], got %g", v)
		}
	}
	unit("gamma", t.Gamma)
	unit("lambda", t.Lambda)
	if t.Clip <= 0 || t.Clip >= 1 {
		bad("training.clip", "must lie in (0, 1), got %g", t.Clip)
	}
	if t.ValueClip < 0 {
		bad("training.value_clip", "must not be negative (0 turns value clipping off), got %g", t.ValueClip)
	}
	for _, f := range []struct {
		key string
		v   float64
	}{{"lr", t.LR}, {"critic_lr", t.CriticLR}, {"sft_lr", t.SFTLR}} {
		if f.v <= 0 || f.v > 1 {
			bad("training."+f.key, "must lie in (0, 1], got %g", f.v)
		}
	}
	if t.SFTSchedule != ScheduleConstant && t.SFTSchedule != ScheduleCosine {
		bad("training.sft_schedule", "must be constant or cosine, got %q", t.SFTSchedule)
	}
	if t.SFTWeightDecay < 0 || t.SFTLR*t.SFTWeightDecay >= 1 {
		bad("training.sft_weight_decay", "must be at least 0 and below 1/sft_lr, got %g", t.SFTWeightDecay)
	}
	if t.SFTBatch < 0 {
		bad("training.sft_batch", "must not be negative (0 trains every step on every demonstration), got %d", t.SFTBatch)
	}
	for _, f := range []struct {
		key string
		v   int
	}{{"epochs", t.Epochs}, {"minibatches", t.Minibatches}, {"critic_epochs", t.CriticEpochs}} {
		if f.v < 1 {
			bad("training."+f.key, "must be at least 1, got %d", f.v)
		}
	}
	if t.CriticInit != CriticFromPolicy && t.CriticInit != CriticFresh {
		bad("training.critic_init", "must be policy or fresh, got %q", t.CriticInit)
	}
	if t.Baseline != BaselineCritic && t.Baseline != BaselineGroup {
		bad("training.baseline", "must be critic or group, got %q", t.Baseline)
	}
	if t.LossWeighting != LossPerToken && t.LossWeighting != LossPerAttempt {
		bad("training.loss_weighting", "must be token or attempt, got %q", t.LossWeighting)
	}
	if t.MaxLiveKL < 0 {
		bad("training.max_live_kl", "must not be negative (0 turns the trust region off), got %g", t.MaxLiveKL)
	}
	if t.MaxStaleness < 0 {
		bad("training.max_staleness", "must not be negative (0 is synchronous), got %d", t.MaxStaleness)
	}
	if t.ImportanceCap < 1 {
		bad("training.importance_cap", "must be at least 1 (an action the policies agree on has weight 1), got %g", t.ImportanceCap)
	}
	if t.MaxGradNorm < 0 {
		bad("training.max_grad_norm", "must not be negative (0 turns clipping off), got %g", t.MaxGradNorm)
	}
	if t.Warmup.Steps < 0 {
		bad("training.warmup.steps", "must not be negative, got %d", t.Warmup.Steps)
	}
	if t.Warmup.EV > 1 {
		bad("training.warmup.ev", "explained variance is at most 1, got %g", t.Warmup.EV)
	}
	switch t.Trainer.Backend {
	case "reference":
	case "exec":
		if len(t.Trainer.Command) == 0 {
			bad("training.trainer.command", "required when training.trainer.backend is exec")
		} else {
			passes := func(ph ...string) bool {
				return slices.ContainsFunc(t.Trainer.Command, func(a string) bool {
					return slices.ContainsFunc(ph, func(p string) bool { return strings.Contains(a, p) })
				})
			}
			if !passes("{out}") {
				bad("training.trainer.command", "must pass {out}, the file the command reports its checkpoint and metrics in")
			}
			if !passes("{job}", "{kind}") {
				bad("training.trainer.command", "must pass {job} or {kind}: the command gets actor, critic and sft jobs")
			}
		}
	default:
		bad("training.trainer.backend", "unknown backend %q (want reference or exec)", t.Trainer.Backend)
	}
}
