package config

import "time"

// Control shapes a run: synthesis rounds, training iterations, evaluation.
type Control struct {
	PoolTarget        int     `yaml:"pool_target"`         // accepted tasks that end synthesis early
	Rounds            int     `yaml:"rounds"`              // synthesis rounds at most
	Seeds             int     `yaml:"seeds"`               // fresh tasks in round 0
	PerSeed           int     `yaml:"per_seed"`            // children tried per accepted task and round
	Iterations        int     `yaml:"iterations"`          // rollout → reward → critic → PPO iterations
	TasksPerIteration int     `yaml:"tasks_per_iteration"` // pool sample per iteration; 0: every task
	Attempts          int     `yaml:"attempts"`            // attempts per task and iteration
	MinSuccess        float64 `yaml:"min_success"`         // fraction of attempts that must be scored to go on
	MaxTurns          int     `yaml:"max_turns"`           // turns per rollout
	EvalEvery         int     `yaml:"eval_every"`          // evaluate every K-th policy version; 0: the last only
	EvalBaseline      bool    `yaml:"eval_baseline"`       // also evaluate the initial policy
	SFTSteps          int     `yaml:"sft_steps"`           // fine-tune on the pool's reference solutions first; 0: no SFT
}

// Eval configures the held-out suite.
type Eval struct {
	Suite    string   `yaml:"suite"`    // suite name; empty turns evaluation off
	Tasks    int      `yaml:"tasks"`    // built-in tasks (0: none, only dirs)
	Rounds   int      `yaml:"rounds"`   // extension rounds of each built-in task
	Seed     uint64   `yaml:"seed"`     // the built-in suite's own seed stream
	Attempts int      `yaml:"attempts"` // attempts per task
	Dirs     []string `yaml:"dirs"`     // Harbor task directories (or dataset roots) added to the suite
}

// Reward configures scoring.
type Reward struct {
	Mode  string  `yaml:"mode"`  // count (the recipe) | fraction | binary (ablations)
	Scale float64 `yaml:"scale"` // reward per passed assertion, frozen in run.started
}

// Rollout bounds an episode.
type Rollout struct {
	MaxNewTokens   int           `yaml:"max_new_tokens"`  // tokens per reply
	Context        int           `yaml:"context"`         // context the harness keeps within (≤ the model's)
	CommandTimeout time.Duration `yaml:"command_timeout"` // a command's default timeout
	MaxObservation int           `yaml:"max_observation"` // bytes of one observation (head and tail kept)
	Temperature    float64       `yaml:"temperature"`
	TopP           float64       `yaml:"top_p"`
}

// Audit configures the verdict.
type Audit struct {
	Threshold     float64 `yaml:"threshold"`      // lowest weighted total accepted
	MaxSimilarity float64 `yaml:"max_similarity"` // above this, a task is a near-duplicate of an eval task
	Rerun         bool    `yaml:"rerun"`          // run the oracle twice to catch nondeterministic tasks
}

func defaultStages() Stages {
	return Stages{
		Demo: Demo{Count: 200, PayloadBytes: 4096},
		Control: Control{PoolTarget: 6, Rounds: 2, Seeds: 4, PerSeed: 1, Iterations: 2, Attempts: 2,
			MinSuccess: 0.5, MaxTurns: 6, EvalBaseline: true},
		Synth:   defaultSynth(),
		Eval:    Eval{Suite: "builtin", Tasks: 3, Rounds: 1, Seed: 1000, Attempts: 2, Dirs: []string{}},
		Reward:  Reward{Mode: "count", Scale: 1},
		Rollout: Rollout{MaxNewTokens: 40, Context: 1024, CommandTimeout: 30 * time.Second, MaxObservation: 1024, Temperature: 1, TopP: 1},
		Audit:   Audit{Threshold: 0.7, MaxSimilarity: 0.8},
	}
}

func (s Stages) check(bad func(path, format string, args ...any)) {
	if d := s.Demo; d.Count < 1 {
		bad("stages.demo.count", "must be at least 1, got %d", d.Count)
	}
	if d := s.Demo; d.PayloadBytes < 0 {
		bad("stages.demo.payload_bytes", "must not be negative, got %d", d.PayloadBytes)
	}
	atLeast := func(path string, v, min int) {
		if v < min {
			bad(path, "must be at least %d, got %d", min, v)
		}
	}
	c := s.Control
	atLeast("stages.control.pool_target", c.PoolTarget, 1)
	atLeast("stages.control.rounds", c.Rounds, 1)
	atLeast("stages.control.seeds", c.Seeds, 1)
	atLeast("stages.control.per_seed", c.PerSeed, 1)
	atLeast("stages.control.iterations", c.Iterations, 1)
	atLeast("stages.control.tasks_per_iteration", c.TasksPerIteration, 0)
	atLeast("stages.control.attempts", c.Attempts, 1)
	atLeast("stages.control.max_turns", c.MaxTurns, 1)
	atLeast("stages.control.eval_every", c.EvalEvery, 0)
	atLeast("stages.control.sft_steps", c.SFTSteps, 0)
	if c.MinSuccess <= 0 || c.MinSuccess > 1 {
		bad("stages.control.min_success", "must be in (0, 1], got %v", c.MinSuccess)
	}
	s.Synth.check(bad)
	e := s.Eval
	if e.Suite != "" {
		atLeast("stages.eval.attempts", e.Attempts, 1)
		atLeast("stages.eval.tasks", e.Tasks, 0)
		atLeast("stages.eval.rounds", e.Rounds, 0)
		if e.Tasks == 0 && len(e.Dirs) == 0 {
			bad("stages.eval", "suite %q has no tasks: set tasks or dirs, or an empty suite to turn evaluation off", e.Suite)
		}
	}
	switch s.Reward.Mode {
	case "count", "fraction", "binary":
	default:
		bad("stages.reward.mode", "unknown mode %q (want count, fraction or binary)", s.Reward.Mode)
	}
	if !(s.Reward.Scale > 0) {
		bad("stages.reward.scale", "must be above 0, got %v", s.Reward.Scale)
	}
	r := s.Rollout
	atLeast("stages.rollout.max_new_tokens", r.MaxNewTokens, 1)
	atLeast("stages.rollout.context", r.Context, 64)
	atLeast("stages.rollout.max_observation", r.MaxObservation, 64)
	if r.CommandTimeout <= 0 {
		bad("stages.rollout.command_timeout", "must be positive, got %s", r.CommandTimeout)
	}
	if r.Temperature < 0 || r.TopP <= 0 || r.TopP > 1 {
		bad("stages.rollout", "temperature %v and top_p %v: want temperature ≥ 0 and top_p in (0, 1]", r.Temperature, r.TopP)
	}
	a := s.Audit
	if a.Threshold < 0 || a.Threshold > 1 || a.MaxSimilarity <= 0 || a.MaxSimilarity > 1 {
		bad("stages.audit", "threshold %v and max_similarity %v must lie in [0, 1] and (0, 1]", a.Threshold, a.MaxSimilarity)
	}
}
