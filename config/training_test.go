package config

import (
	"strings"
	"testing"
)

func TestTrainingOverlay(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte("training:\n  replay: false\n  lr: 3e-5\n  warmup: {steps: 0}\n  trainer:\n    backend: exec\n    command: [torchrun, train.py, --job, \"{job}\", --out, \"{out}\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Training
	if tr.Replay || tr.Adam().LR != 3e-5 || tr.Epochs != 2 || tr.Warmup.Steps != 0 || tr.Warmup.EV != 0.1 ||
		tr.Trainer.Backend != "exec" || tr.Trainer.Command[0] != "torchrun" || tr.Trainer.Command[3] != "{job}" {
		t.Errorf("parsed %+v", tr)
	}
	if d := Default().Training; d.Trainer.Backend != "reference" || !d.Replay || d.Adam().LR != 2e-4 || d.Baseline != BaselineGroup || d.LossWeighting != LossPerToken {
		t.Errorf("defaults %+v", d)
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
		{"training:\n  trainer:\n    backend: exec\n    command: [python, train.py, \"{kind}\"]\n", `training.trainer.command: must pass {out}`},
		{"training:\n  trainer:\n    backend: exec\n    command: [python, train.py, \"{manifest}\", \"{out}\"]\n", `training.trainer.command: must pass {job} or {kind}`},
		{"training:\n  baseline: value\n", `p.yaml:2:13: training.baseline: must be critic or group, got "value"`},
		{"training:\n  loss_weighting: turn\n", `p.yaml:2:19: training.loss_weighting: must be token or attempt, got "turn"`},
		{"training:\n  sft_schedule: linear\n", `p.yaml:2:17: training.sft_schedule: must be constant or cosine, got "linear"`},
		{"training:\n  sft_weight_decay: -1\n", `p.yaml:2:21: training.sft_weight_decay: must be at least 0 and below 1/sft_lr, got -1`},
		{"training:\n  warmup:\n    stpes: 3\n", `unknown key "stpes" in training.warmup (did you mean "steps"?)`},
	} {
		_, err := Parse("p.yaml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got  %v\n want %s", tc.src, err, tc.want)
		}
	}
}
