package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// tinyAblation is the tiny pipeline without SFT and one variant: the actor
// update without routing replay.
var tinyAblation = strings.NewReplacer("  id: tiny\n", "  id: abl\n", "    sft_steps: 2\n", "    sft_steps: 0\n").Replace(tinyPipeline) + `variants:
  - name: replay-off
    set: {training.replay: false}
`

// `t1 ablate` runs the base run and its variant one after the other on one
// seed, each with its own settings, the variant as a branch of the base
// run where it departs from it, and writes one report comparing them.
func TestAblateRunsVariantsSideBySide(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	data := t.TempDir()
	cfg := writeConfig(t, tinyAblation)
	var stderr bytes.Buffer
	cmd := command(t, data, cfg, "ablate", "--json", "--log-level", "warn")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ablate: %v\n%s\n%s", err, out, stderr.String())
	}
	var sum struct {
		Base string `json:"base"`
		Runs []struct {
			Run    string            `json:"run"`
			Status string            `json:"status"`
			Events map[string]uint64 `json:"events"`
			Recipe []struct {
				Stage string `json:"stage"`
				From  string `json:"from"`
			} `json:"recipe"`
		} `json:"runs"`
		Report string `json:"report"`
		HTML   string `json:"report_html"`
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if sum.Base != "abl" || len(sum.Runs) != 2 || sum.Runs[0].Run != "abl" || sum.Runs[1].Run != "abl-replay-off" {
		t.Fatalf("%+v", sum)
	}
	for _, r := range sum.Runs {
		if r.Status != "completed" || r.Events["policy.updated"] != 1 {
			t.Errorf("run %s: %s, events %v", r.Run, r.Status, r.Events)
		}
	}
	// The variant changes only the actor update: it is the base run up to
	// iteration 0's update, taken over as a branch, not synthesised, audited
	// and evaluated again.
	v := sum.Runs[1]
	if v.Events["task.synthesized"] != 0 || v.Events["task.audited"] != 0 || v.Events["eval.completed"] != 1 ||
		v.Events["rollout.completed"] >= sum.Runs[0].Events["rollout.completed"] {
		t.Errorf("the variant redid what it shares with the base run: %v", v.Events)
	}
	if len(v.Recipe) != 2 || v.Recipe[0].Stage != "base" || v.Recipe[0].From != "abl" || v.Recipe[1].Stage != "after RL" || v.Recipe[1].From != "" {
		t.Errorf("the variant's recipe: %+v", v.Recipe)
	}
	started, err := command(t, data, cfg, "events", "list", "--run", "abl-replay-off", "--type", "run.started", "--json").Output()
	if err != nil || !bytes.Contains(started, []byte(`"parent":"abl"`)) || !bytes.Contains(started, []byte(`"stage":"ppo"`)) {
		t.Errorf("the variant's run.started: %v\n%s", err, started)
	}
	// Each run trained with its own setting, and replay leaves no routing
	// mismatch between sampling and training.
	for run, want := range map[string]string{"abl": "true", "abl-replay-off": "false"} {
		out, err := command(t, data, cfg, "query", "metrics", "--run", run, "--select", "replay,routing_mismatches,routing_sets", "--format", "csv").Output()
		if err != nil {
			t.Fatalf("query %s: %v\n%s", run, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 {
			t.Fatalf("metrics of %s:\n%s", run, out)
		}
		f := strings.Split(lines[1], ",")
		if f[0] != want || (want == "true" && f[1] != "0") || f[2] == "0" {
			t.Errorf("metrics of %s: %s, want replay %s", run, lines[1], want)
		}
	}
	for _, p := range []string{sum.Report, sum.HTML} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("abl-replay-off")) {
			t.Errorf("%s does not show the variant", p)
		}
	}
	// A second ablation finds both runs complete and runs nothing again.
	out2, err := command(t, data, cfg, "ablate", "--json", "--log-level", "warn").Output()
	if err != nil {
		t.Fatalf("second ablate: %v\n%s", err, out2)
	}
	var sum2 struct {
		Runs []struct {
			Events map[string]uint64 `json:"events"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(out2, &sum2); err != nil || len(sum2.Runs) != 2 {
		t.Fatalf("%v %s", err, out2)
	}
	for i := range sum2.Runs {
		for typ, n := range sum.Runs[i].Events {
			if sum2.Runs[i].Events[typ] != n {
				t.Errorf("the second ablation changed %s of %s: %d → %d", typ, sum.Runs[i].Run, n, sum2.Runs[i].Events[typ])
			}
		}
	}
}

// With --seeds, the seeds' runs run at once in one process, each run's
// stages consuming its own events alone (their consumers deleted at the
// run's end), and every run is the run it is when its seed runs alone.
func TestAblateRunsSeedsAtOnce(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	cfg := writeConfig(t, tinyAblation)
	var progress bytes.Buffer
	runs := func(data string, args ...string) []string {
		progress.Reset()
		cmd := command(t, data, cfg, append([]string{"ablate", "--json", "--log-level", "warn"}, args...)...)
		cmd.Stderr = &progress
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ablate %v: %v\n%s%s", args, err, out, progress.Bytes())
		}
		var sum struct {
			Runs []struct{ Run, Status string } `json:"runs"`
		}
		if err := json.Unmarshal(out, &sum); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var ids []string
		for _, r := range sum.Runs {
			if r.Status != "completed" {
				t.Fatalf("run %s: %s", r.Run, r.Status)
			}
			ids = append(ids, r.Run)
		}
		return ids
	}
	together, alone := t.TempDir(), t.TempDir()
	if got := runs(together, "--seeds", "1,2", "--jobs", "2"); strings.Join(got, " ") != "abl-s1 abl-s1-replay-off abl-s2 abl-s2-replay-off" {
		t.Fatalf("runs %v", got)
	}
	// Each progress line of runs at once names the run it is about, a
	// branch's its own rather than its base run's.
	for line := range strings.Lines(progress.String()) {
		if _, after, ok := strings.Cut(line, "== run "); ok {
			run, _, _ := strings.Cut(after, ":")
			if run = strings.TrimSpace(run); !strings.HasPrefix(line, run+"  ") {
				t.Errorf("progress line of %s under another run's name: %q", run, line)
			}
		}
	}
	out, err := command(t, together, cfg, "status", "--json").Output()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	var st struct {
		Consumers []struct{ Name string } `json:"consumers"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	// Every run's consumers were its own, and each went with its run's end.
	if len(st.Consumers) != 0 {
		t.Errorf("consumers left after the ablation: %+v", st.Consumers)
	}
	runs(alone, "--seeds", "2")
	for _, run := range []string{"abl-s2", "abl-s2-replay-off"} {
		sameDigest(t, runDigest(t, alone, cfg, run), runDigest(t, together, cfg, run))
	}
}

// With --rl-seeds, RL runs again at each seed from the base run's one
// fine-tuned policy: a branch's fine-tuned checkpoint is the base run's
// byte for byte, and its iterations sample from streams of its own seed.
func TestAblateRLSeedsShareTheFineTunedPolicy(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	data := t.TempDir()
	cfg := writeConfig(t, strings.Replace(tinyPipeline, "  id: tiny\n", "  id: rls\n", 1))
	out, err := command(t, data, cfg, "ablate", "--seeds", "1", "--rl-seeds", "1,2", "--json", "--log-level", "warn").Output()
	if err != nil {
		t.Fatalf("ablate: %v\n%s", err, out)
	}
	var sum struct {
		Runs    []struct{ Run, Status string } `json:"runs"`
		RLSeeds []uint                         `json:"rl_seeds"`
		Spread  []struct {
			Variant string `json:"variant"`
			Stage   string `json:"stage"`
			Seeds   int    `json:"seeds"`
		} `json:"spread"`
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(sum.Runs) != 2 || sum.Runs[0].Run != "rls-s1" || sum.Runs[1].Run != "rls-s1-rl2" || len(sum.RLSeeds) != 2 {
		t.Fatalf("%s", out)
	}
	for _, r := range sum.Runs {
		if r.Status != "completed" {
			t.Errorf("run %s: %s", r.Run, r.Status)
		}
	}
	for _, r := range sum.Spread {
		if r.Variant != "rls-s1" || r.Seeds != 2 {
			t.Errorf("%s of %s over %d seeds, want rls-s1's over 2", r.Stage, r.Variant, r.Seeds)
		}
	}
	type event struct {
		Payload struct {
			Checkpoint struct{ SHA256 string } `json:"checkpoint"`
			Purpose    string                  `json:"purpose"`
			Seed       wideUint                `json:"seed"`
		} `json:"payload"`
	}
	events := func(run, typ string) []event {
		out, err := command(t, data, cfg, "events", "list", "--run", run, "--type", typ, "--json").Output()
		if err != nil {
			t.Fatalf("events %s of %s: %v", typ, run, err)
		}
		var evs []event
		for line := range strings.Lines(string(out)) {
			var e event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%v: %q", err, line)
			}
			evs = append(evs, e)
		}
		return evs
	}
	base, branch := events("rls-s1", "sft.completed"), events("rls-s1-rl2", "sft.completed")
	if len(base) != 1 || len(branch) != 1 || base[0].Payload.Checkpoint.SHA256 == "" ||
		base[0].Payload.Checkpoint.SHA256 != branch[0].Payload.Checkpoint.SHA256 {
		t.Errorf("fine-tuned checkpoints: base %+v, branch %+v", base, branch)
	}
	trainSeeds := func(run string) map[wideUint]bool {
		m := map[wideUint]bool{}
		for _, e := range events(run, "rollout.requested") {
			if e.Payload.Purpose == "train" {
				m[e.Payload.Seed] = true
			}
		}
		return m
	}
	a, b := trainSeeds("rls-s1"), trainSeeds("rls-s1-rl2")
	if len(a) == 0 || len(b) == 0 {
		t.Fatalf("training attempts: %d in the base run, %d in the branch", len(a), len(b))
	}
	for s := range b {
		if a[s] {
			t.Errorf("the branch's training attempt draws from the base run's stream %d", s)
		}
	}
	// Again, the ended branch is not branched again: that would fine-tune
	// once more for nothing.
	var progress bytes.Buffer
	again := command(t, data, cfg, "ablate", "--seeds", "1", "--rl-seeds", "1,2", "--json", "--log-level", "warn")
	again.Stderr = &progress
	if out, err := again.Output(); err != nil {
		t.Fatalf("second ablate: %v\n%s%s", err, out, progress.Bytes())
	}
	if strings.Contains(progress.String(), "a branch of") {
		t.Errorf("the second ablation branched again:\n%s", progress.Bytes())
	}
}

// wideUint reads a uint64 that --json prints as a number up to 2^53 and as
// a string beyond, where JavaScript's numbers lose digits.
type wideUint uint64

func (w *wideUint) UnmarshalJSON(b []byte) error {
	var v uint64
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return err
		}
		v = n
	} else if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*w = wideUint(v)
	return nil
}
