package config

import (
	"strings"
	"testing"

	"github.com/t1pipe/t1/trainer"
)

func TestTrainingOverlay(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte("training:\n  replay: false\n  lr: 3e-5\n  warmup: {steps: 0}\n  trainer:\n    backend: exec\n    command: [torchrun, train.py, --manifest, \"{manifest}\", --out, \"{out}\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Training
	o := tr.TrainerOptions()
	if o.Replay || o.Adam.LR != 3e-5 || o.Epochs != 1 || tr.Warmup.Steps != 0 || tr.Warmup.EV != 0.1 || tr.Trainer.Command[3] != "{manifest}" {
		t.Errorf("parsed %+v -> %+v", tr, o)
	}
	if e, ok := tr.NewTrainer(nil).(*trainer.Exec); !ok || e.Argv[0] != "torchrun" {
		t.Errorf("exec backend: %#v", tr.NewTrainer(nil))
	}
	if r, ok := Default().Training.NewTrainer(nil).(*trainer.Reference); !ok || !r.Opt.Replay || r.Opt.Adam.LR != 1e-4 {
		t.Errorf("reference backend: %#v", Default().Training.NewTrainer(nil))
	}
	if tr.CriticAdam().LR != 5e-4 || tr.CriticAdam().Beta2 != 0.95 {
		t.Errorf("critic adam %+v", tr.CriticAdam())
	}
}

func TestTrainingErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"training:\n  gamma: 1.5\n", `p.yaml:2:10: training.gamma: must lie in [0, 1], got 1.5`},
		{"training:\n  clip: 0\n", `p.yaml:2:9: training.clip: must lie in (0, 1), got 0`},
		{"training:\n  epochs: 0\n", `p.yaml:2:11: training.epochs: must be at least 1, got 0`},
		{"training:\n  lr: -1\n", `p.yaml:2:7: training.lr: must lie in (0, 1], got -1`},
		{"training:\n  trainer:\n    backend: torch\n", `p.yaml:3:14: training.trainer.backend: unknown backend "torch" (want reference or exec)`},
		{"training:\n  trainer:\n    backend: exec\n", `training.trainer.command: required when training.trainer.backend is exec`},
		{"training:\n  trainer:\n    backend: exec\n    command: [python, train.py]\n", `training.trainer.command: must pass {out}`},
		{"training:\n  warmup:\n    stpes: 3\n", `unknown key "stpes" in training.warmup (did you mean "steps"?)`},
	} {
		_, err := Parse("p.yaml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got  %v\n want %s", tc.src, err, tc.want)
		}
	}
}
