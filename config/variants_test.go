package config

import (
	"strings"
	"testing"
)

func TestVariantAppliesItsKeysOnly(t *testing.T) {
	base := Default()
	v, err := base.Variant("replay-off")
	if err != nil {
		t.Fatal(err)
	}
	if v.Training.Replay || !base.Training.Replay {
		t.Fatalf("replay: variant %v, base %v", v.Training.Replay, base.Training.Replay)
	}
	if v.Run.ID != "main-replay-off" || v.Run.Seed != base.Run.Seed {
		t.Fatalf("run %+v", v.Run)
	}
	v.Training.Replay = true
	v.Run = base.Run
	if v.Stages.Reward != base.Stages.Reward || v.Training.Warmup != base.Training.Warmup || v.Training.LR != base.Training.LR {
		t.Fatal("the variant changed more than training.replay")
	}
	for name, check := range map[string]func(Config) bool{
		"critic-cold": func(c Config) bool {
			return c.Training.Warmup.Steps == 0 && c.Training.CriticInit == CriticFresh && c.Stages.Reward.Mode == "count"
		},
		"reward-fraction": func(c Config) bool { return c.Stages.Reward.Mode == "fraction" && c.Training.Warmup.Steps == 4 },
		"reward-binary":   func(c Config) bool { return c.Stages.Reward.Mode == "binary" && c.Training.Replay },
	} {
		c, err := base.Variant(name)
		if err != nil || !check(c) {
			t.Errorf("%s: %v %+v %+v", name, err, c.Stages.Reward, c.Training.Warmup)
		}
	}
}

func TestVariantsFromAFile(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte(`run: {id: abl, seed: 7}
variants:
  - name: lr-high
    set: {training.lr: 1.0e-3, training.epochs: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.VariantNames(); len(got) != 1 || got[0] != "lr-high" {
		t.Fatalf("a variants list replaces the defaults: %v", got)
	}
	v, err := cfg.Variant("lr-high")
	if err != nil {
		t.Fatal(err)
	}
	if v.Training.LR != 1e-3 || v.Training.Epochs != 2 || v.Run.ID != "abl-lr-high" || v.Run.Seed != 7 {
		t.Fatalf("%+v %+v", v.Training, v.Run)
	}
	if _, err := cfg.Variant("nope"); err == nil || !strings.Contains(err.Error(), "lr-high") {
		t.Fatalf("unknown variant: %v", err)
	}
}

func TestBadVariants(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown key", `{name: x, set: {training.replai: false}}`, "replai"},
		{"wrong type", `{name: x, set: {training.epochs: many}}`, "epochs"},
		{"invalid value", `{name: x, set: {stages.reward.mode: half}}`, "stages.reward.mode"},
		{"fixed key", `{name: x, set: {store.bucket: other}}`, "store.bucket cannot differ"},
		{"run id", `{name: x, set: {run.id: other}}`, "run.id cannot differ"},
		{"empty", `{name: x, set: {}}`, "at least one key"},
		{"bad name", `{name: "X Y", set: {training.replay: false}}`, "a-z, 0-9"},
		{"section as value", `{name: x, set: {training: 1}}`, "training"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte("variants:\n  - "+c.yaml+"\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if err != nil && strings.Count(err.Error(), "\n") > 2 {
				t.Fatalf("one problem, several lines: %v", err)
			}
		})
	}
	_, err := Parse("p.yaml", []byte("variants:\n  - {name: a, set: {training.replay: false}}\n  - {name: a, set: {training.epochs: 2}}\n"))
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate: %v", err)
	}
}
