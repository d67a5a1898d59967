package pipeline

import "testing"

// A variant is made as a branch at the first stage its settings reach,
// and never when one of them may change what comes before the first
// iteration.
func TestVariantBranch(t *testing.T) {
	for _, c := range []struct {
		keys  []string
		stage string
	}{
		{[]string{"stages.reward.mode"}, "reward"},
		{[]string{"training.baseline"}, "critic"},
		{[]string{"training.warmup.steps", "training.critic_init"}, "critic"},
		{[]string{"training.replay"}, "ppo"},
		{[]string{"training.replay", "stages.reward.mode"}, "reward"},
		{[]string{"training.lr", "training.sft_lr"}, "sft"},
		{[]string{"training.max_grad_norm"}, "sft"},
		{[]string{"training.sft_schedule", "training.sft_weight_decay", "training.max_live_kl"}, "sft"},
		{[]string{"stages.rollout.train_temperature", "stages.control.fresh_tasks"}, "rollout"},
		{[]string{"stages.control.skip_uniform", "training.lr"}, "rollout"},
		{[]string{"stages.rollout.temperature"}, ""},
		{[]string{"stages.control.iterations"}, ""},
		{[]string{"stages.rollout.model.action_format"}, ""},
		{[]string{"inference.model.layers"}, ""},
		{[]string{"training.replay", "stages.synth.seeds"}, ""},
		{[]string{"training.trainer.backend"}, ""},
		{nil, ""},
	} {
		stage, ok := VariantBranch(c.keys)
		if stage != c.stage || ok != (c.stage != "") {
			t.Errorf("%v: %q %v, want %q", c.keys, stage, ok, c.stage)
		}
	}
}
