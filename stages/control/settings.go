package control

import "github.com/t1pipe/t1/check"

// Settings shape a run: synthesis rounds, training iterations,
// evaluation (stages.control in pipeline.yaml).
type Settings struct {
	// PoolTarget is how many accepted tasks end synthesis early.
	PoolTarget int `yaml:"pool_target"`
	// Rounds bounds synthesis rounds.
	Rounds int `yaml:"rounds"`
	// Seeds is round 0's fresh tasks.
	Seeds int `yaml:"seeds"`
	// PerSeed is the children tried per accepted task in later rounds.
	PerSeed int `yaml:"per_seed"`
	// Iterations of rollout → reward → critic → PPO.
	Iterations int `yaml:"iterations"`
	// TasksPerIteration samples the pool each iteration (0: every task).
	TasksPerIteration int `yaml:"tasks_per_iteration"`
	// Attempts is the attempts per task and iteration.
	Attempts int `yaml:"attempts"`
	// MinSuccess is the fraction of attempts that must be scored for an
	// iteration to go on with what succeeded.
	MinSuccess float64 `yaml:"min_success"`
	// MaxTurns bounds each rollout (0: the rollout stage's default).
	MaxTurns int `yaml:"max_turns"`
	// EvalEvery evaluates every K-th policy version (0: only the last).
	EvalEvery int `yaml:"eval_every"`
	// EvalBaseline also evaluates the initial policy.
	EvalBaseline bool `yaml:"eval_baseline"`
	// SFTSteps, when above 0, fine-tunes the initial policy on
	// demonstrations of the pool's reference solutions before the first
	// iteration (base → SFT → RL).
	SFTSteps int `yaml:"sft_steps"`
	// SFTShuffle takes each pass of the fine-tuning over the
	// demonstrations in an order drawn from the run seed rather than in
	// the pool's order, so that runs of one pool and one initial model
	// (PoolSeed, inference.model.seed) still fine-tune differently, as
	// training seeds of a post-training run from one pretrained
	// checkpoint do.
	SFTShuffle bool `yaml:"sft_shuffle" json:",omitzero"`
	// RLTasks, with fine-tuning on, keeps this many pool tasks (a seeded
	// draw) out of the demonstrations; the iterations sample only them, so
	// RL trains on tasks the fine-tuned policy has to generalise to rather
	// than ones it saw solved (0: fine-tune on every task and iterate over
	// them all). At most all but one of the pool's tasks are kept out.
	RLTasks int `yaml:"rl_tasks"`
	// SkipUniform draws each iteration's tasks (after the first) from
	// those whose last group of attempts did not all earn the same reward
	// — a group the group baseline gives no advantage — while there are
	// enough of them; tasks not drawn yet count as informative.
	SkipUniform bool `yaml:"skip_uniform"`
	// FreshTasks draws each iteration's tasks (after the first) from those
	// no iteration has drawn yet while there are enough of them, so RL
	// meets as many different tasks as its iterations hold rather than
	// drilling the same ones (with SkipUniform, the drawn ones it still
	// judges informative come next).
	FreshTasks bool `yaml:"fresh_tasks" json:",omitzero"`
	// PoolSeed, when above 0, draws the pool (synthesis), its division
	// between demonstrations and RL tasks, and the demonstrations in
	// place of the run seed, so runs of different seeds train on one
	// dataset and differ only in what training draws: the initial model
	// (inference.model.seed), the iterations' tasks and every sample.
	PoolSeed uint64 `yaml:"pool_seed" json:",omitzero"`
}

// DefaultSettings is a small run for a laptop.
func DefaultSettings() Settings {
	return Settings{PoolTarget: 192, Rounds: 2, Seeds: 96, PerSeed: 1, Iterations: 3, TasksPerIteration: 16, Attempts: 4, MinSuccess: 0.5,
		MaxTurns: 6, EvalBaseline: true, SFTSteps: 1500}
}

// Check reports every invalid setting.
func (s Settings) Check(r check.Report) {
	r.AtLeast("pool_target", s.PoolTarget, 1)
	r.AtLeast("rounds", s.Rounds, 1)
	r.AtLeast("seeds", s.Seeds, 1)
	r.AtLeast("per_seed", s.PerSeed, 1)
	r.AtLeast("iterations", s.Iterations, 1)
	r.AtLeast("tasks_per_iteration", s.TasksPerIteration, 0)
	r.AtLeast("attempts", s.Attempts, 1)
	r.AtLeast("max_turns", s.MaxTurns, 1)
	r.AtLeast("eval_every", s.EvalEvery, 0)
	r.AtLeast("sft_steps", s.SFTSteps, 0)
	r.AtLeast("rl_tasks", s.RLTasks, 0)
	if s.MinSuccess <= 0 || s.MinSuccess > 1 {
		r("min_success", "must be in (0, 1], got %v", s.MinSuccess)
	}
}
