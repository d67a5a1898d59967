package config

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

const setupsFile = `run: {id: base, seed: 7}
stages: {eval: {attempts: 4}}
variants:
  - {name: replay-off, set: {training.replay: false}}
setups:
  - name: long
    set: {run.id: base-long, stages.control.iterations: 9, stages.eval.attempts: 2}
    variants:
      - {name: lr-low, set: {training.lr: 1.0e-4}}
  - name: plain
    set: {run.id: base-plain, training.epochs: 3}
`

func TestSetupSetsItsKeysAndVariants(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte(setupsFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.SetupNames(); !reflect.DeepEqual(got, []string{"long", "plain"}) {
		t.Fatalf("names %v", got)
	}
	s, err := cfg.Setup("long")
	if err != nil {
		t.Fatal(err)
	}
	if s.Run.ID != "base-long" || s.Run.Seed != 7 || s.Stages.Control.Iterations != 9 || s.Stages.Eval.Attempts != 2 {
		t.Fatalf("run %+v, iterations %d, eval attempts %d", s.Run, s.Stages.Control.Iterations, s.Stages.Eval.Attempts)
	}
	if got := s.VariantNames(); !reflect.DeepEqual(got, []string{"lr-low"}) || len(s.Setups) != 0 {
		t.Fatalf("a setup's variants are its own: %v, setups %v", got, s.SetupNames())
	}
	v, err := s.Variant("lr-low")
	if err != nil || v.Run.ID != "base-long-lr-low" || v.Training.LR != 1e-4 || v.Stages.Control.Iterations != 9 {
		t.Fatalf("variant of a setup: %v %+v", err, v.Run)
	}
	// The file's own configuration is untouched by its setups.
	if cfg.Run.ID != "base" || cfg.Stages.Control.Iterations == 9 || cfg.Stages.Eval.Attempts != 4 {
		t.Fatalf("base changed: %+v", cfg.Run)
	}
	p, err := cfg.Setup("plain")
	if err != nil || p.Training.Epochs != 3 || len(p.Variants) != 0 || p.Stages.Eval.Attempts != 4 {
		t.Fatalf("plain: %v epochs %d variants %v", err, p.Training.Epochs, p.VariantNames())
	}
	_, err = cfg.Setup("nope")
	if err == nil || !strings.Contains(err.Error(), `no setup "nope" (configured: long, plain)`) {
		t.Fatalf("unknown setup: %v", err)
	}
	_, err = Default().Setup("long")
	if err == nil || !strings.Contains(err.Error(), "has no setups") {
		t.Fatalf("no setups: %v", err)
	}
}

func TestBadSetups(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"no run id", `{name: x, set: {training.replay: false}}`, "run.id is required"},
		{"the file's run id", `{name: x, set: {run.id: main}}`, "the file's own"},
		{"unknown key", `{name: x, set: {run.id: x, training.replai: false}}`, "replai"},
		{"invalid value", `{name: x, set: {run.id: x, stages.reward.mode: half}}`, "stages.reward.mode"},
		{"variants as a key", `{name: x, set: {run.id: x, variants: []}}`, "cannot be set by a setup"},
		{"bad variant", `{name: x, set: {run.id: x}, variants: [{name: v, set: {run.id: y}}]}`, "run.id cannot differ"},
		{"bad name", `{name: "X Y", set: {run.id: x}}`, "a-z, 0-9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte("setups:\n  - "+c.yaml+"\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "p.yaml:2:") {
				t.Fatalf("want the problem at the setup's line: %v", err)
			}
		})
	}
	_, err := Parse("p.yaml", []byte("setups:\n  - {name: a, set: {run.id: x}}\n  - {name: b, set: {run.id: x}}\n"))
	if err == nil || !strings.Contains(err.Error(), "setup a's too") {
		t.Fatalf("shared run id: %v", err)
	}
}

// The setups of examples/t1-table.yaml resolve to exactly the
// configurations the files they replaced gave (the commit below is the
// last to hold them), variants included: the same run ids and values, so
// the figures BENCHMARKS.md reports from those files are what --setup
// reproduces. Copies that BENCHMARKS.md describes as an example with keys
// changed are built from the file the same way.
func TestSetupsAreTheFilesTheyReplaced(t *testing.T) {
	const commit = "84f5bca8d0cdf5f76fc5ec1264d684eac65facb0"
	show := func(file string) string {
		out, err := exec.Command("git", "show", commit+":examples/"+file).Output()
		if err != nil {
			t.Skipf("git show %s:examples/%s: %v (a clone without that history)", commit[:7], file, err)
		}
		return string(out)
	}
	edit := func(s string, pairs ...string) string {
		for i := 0; i < len(pairs); i += 2 {
			if !strings.Contains(s, pairs[i]) {
				t.Fatalf("%q not in the file", pairs[i])
			}
			s = strings.Replace(s, pairs[i], pairs[i+1], 1)
		}
		return s
	}
	rename, oneBase := show("t1-table-rename.yaml"), show("t1-table-one-base.yaml")
	for _, c := range []struct {
		setup, old string
		variants   bool // the old file's variants are the setup's
	}{
		{"", show("t1-table.yaml"), true},
		{"rename", rename, true},
		{"one-base", oneBase, false},
		{"one-base-sft800", edit(oneBase, "id: t1-base\n", "id: t1-base-sft800\n", "sft_steps: 1000", "sft_steps: 800"), false},
		{"compositions", edit(rename, "id: t1-rename\n", "id: t1-comp2\n", "seeds: 576", "seeds: 288",
			"rounds: 1", "rounds: 2", "attempts: 2\n", "attempts: 2\n    rounds: 1\n"), false},
	} {
		t.Run(c.setup, func(t *testing.T) {
			want, err := Parse("old.yaml", []byte(c.old))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Load("../examples/t1-table.yaml")
			if err != nil {
				t.Fatal(err)
			}
			got := cfg
			if c.setup != "" {
				if got, err = cfg.Setup(c.setup); err != nil {
					t.Fatal(err)
				}
			}
			if !c.variants {
				if len(got.Variants) != 0 {
					t.Fatalf("variants %v", got.VariantNames())
				}
				want.Variants = nil
			}
			for _, n := range want.VariantNames() {
				w, err := want.Variant(n)
				if err != nil {
					t.Fatal(err)
				}
				g, err := got.Variant(n)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("variant %s: %+v\nwant %+v", n, g, w)
				}
			}
			got.Setups, want.Setups = nil, nil
			if !reflect.DeepEqual(got, want) {
				gy, _ := got.YAML()
				wy, _ := want.YAML()
				t.Fatalf("setup %q differs from its file:\n%s", c.setup, lineDiff(string(gy), string(wy)))
			}
		})
	}
}

func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var out []string
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			out = append(out, "got  "+a, "want "+b)
		}
	}
	return strings.Join(out, "\n")
}
