package config

import (
	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/check"
	"github.com/t1pipe/t1/stages/audit"
	"github.com/t1pipe/t1/stages/control"
	"github.com/t1pipe/t1/stages/demo"
	"github.com/t1pipe/t1/stages/eval"
	"github.com/t1pipe/t1/stages/reward"
	"github.com/t1pipe/t1/stages/synth"
)

// Stages holds each stage's settings, as the stage declares them beside
// its code with their defaults and checks. Their Go field names and order
// are part of the pipeline's configuration hash (pipeline.ConfigHash),
// which feeds event ids: renaming or reordering one changes every event
// of a run.
type Stages struct {
	Demo    demo.Settings    `yaml:"demo"`
	Control control.Settings `yaml:"control"`
	Synth   synth.Settings   `yaml:"synth"`
	Eval    eval.Settings    `yaml:"eval"`
	Reward  reward.Settings  `yaml:"reward"`
	// Rollout bounds an episode of the agent harness.
	Rollout agent.Settings `yaml:"rollout"`
	Audit   audit.Settings `yaml:"audit"`
}

func defaultStages() Stages {
	return Stages{
		Demo:    demo.DefaultSettings(),
		Control: control.DefaultSettings(),
		Synth:   synth.DefaultSettings(),
		Eval:    eval.DefaultSettings(),
		Reward:  reward.DefaultSettings(),
		Rollout: agent.DefaultSettings(),
		Audit:   audit.DefaultSettings(),
	}
}

// check has each stage check its own settings under stages.<stage>.
func (s Stages) check(r check.Report) {
	r = r.Under("stages")
	s.Demo.Check(r.Under("demo"))
	s.Control.Check(r.Under("control"))
	s.Synth.Check(r.Under("synth"))
	s.Eval.Check(r.Under("eval"))
	s.Reward.Check(r.Under("reward"))
	s.Rollout.Check(r.Under("rollout"))
	s.Audit.Check(r.Under("audit"))
}
