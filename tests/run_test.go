package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
)

// tinyPipeline is the whole pipeline at its smallest: two seed tasks, one
// iteration, one evaluation task.
const tinyPipeline = `run:
  id: tiny
stages:
  control:
    pool_target: 2
    rounds: 1
    seeds: 2
    iterations: 1
    attempts: 1
    max_turns: 2
    sft_steps: 2
  eval:
    tasks: 1
    rounds: 0
    attempts: 1
  rollout:
    max_new_tokens: 24
    context: 512
training:
  warmup:
    steps: 1
`

// `t1 run` drives every stage from run.started to run.completed in one
// process on embedded NATS, S3 and bubblewrap, writes its report, and a
// second `t1 run` finds the run complete without redoing anything; the
// attempts export as ATIF.
func TestRunPipelineEndToEnd(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "pipeline.yaml")
	// Two iterations, so the second starts from a policy PPO wrote.
	twoIterations := strings.Replace(tinyPipeline, "    iterations: 1\n", "    iterations: 2\n", 1)
	if err := os.WriteFile(cfg, []byte(twoIterations), 0o644); err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Status string            `json:"status"`
		Reason string            `json:"reason"`
		Events map[string]uint64 `json:"events"`
		Evals  []struct {
			PolicyVersion int64 `json:"policy_version"`
			Attempts      int   `json:"attempts"`
		} `json:"evals"`
		Dead   uint64 `json:"dead_letters"`
		Report string `json:"report"`
		HTML   string `json:"report_html"`
	}
	var sums [2]summary
	for i := range sums {
		out, err := command(t, data, cfg, "run", "--json", "--log-level", "warn").Output()
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
		if err := json.Unmarshal(out, &sums[i]); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
	}
	s := sums[0]
	if s.Status != "completed" {
		t.Fatalf("status %s (%s): %+v", s.Status, s.Reason, s.Events)
	}
	for typ, want := range map[string]uint64{"run.started": 1, "synth.requested": 1, "pool.sealed": 1, "sft.requested": 1, "sft.completed": 1,
		"iteration.started": 2, "batch.ready": 2, "critic.updated": 2, "policy.updated": 2, "eval.requested": 3, "eval.completed": 3, "run.completed": 1} {
		if s.Events[typ] != want {
			t.Errorf("%d %s events, want %d", s.Events[typ], typ, want)
		}
	}
	if s.Events["synth.candidate"] == 0 || s.Events["task.synthesized"] == 0 || s.Events["task.audited"] == 0 || s.Events["rollout.requested"] == 0 ||
		s.Events["reward.scored"] == 0 || s.Events["rollout.completed"] != s.Events["reward.scored"] || s.Events["rollout.requested"] != s.Events["rollout.completed"] {
		t.Errorf("events %+v", s.Events)
	}
	for typ := range s.Events {
		if strings.HasSuffix(typ, ".failed") || typ == "run.failed" {
			t.Errorf("%d %s events", s.Events[typ], typ)
		}
	}
	// v0 is the base policy, v1 its fine-tuned successor, v2 and v3 after
	// the two PPO updates: the recipe table's three rows.
	if len(s.Evals) != 3 || s.Evals[0].PolicyVersion != 0 || s.Evals[1].PolicyVersion != 1 || s.Evals[2].PolicyVersion != 3 || s.Dead != 0 {
		t.Errorf("evals %+v, dead letters %d", s.Evals, s.Dead)
	}
	// Every table has rows, read through the run's claim checks.
	out, err := command(t, data, cfg, "digest", "--run", "tiny", "--json").Output()
	if err != nil {
		t.Fatalf("digest: %v\n%s", err, out)
	}
	var dg struct {
		Tables []struct {
			Name string `json:"table"`
			Rows int64  `json:"rows"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(out, &dg); err != nil {
		t.Fatalf("digest: %v\n%s", err, out)
	}
	rows := map[string]int64{}
	for _, tb := range dg.Tables {
		rows[tb.Name] = tb.Rows
	}
	for _, tb := range []string{"tasks", "audits", "trajectories", "turns", "tokens", "routing", "rewards", "values", "metrics", "eval_results"} {
		if rows[tb] == 0 {
			t.Errorf("table %s has no rows (%v)", tb, rows)
		}
	}
	if rows["metrics"] != 2 {
		t.Errorf("%d metrics rows for two iterations", rows["metrics"])
	}
	toolsReadAlike(t, data, cfg, "tiny", rows)
	// The sealed pool reads back through its claim checks.
	out, err = command(t, data, cfg, "pool", "show", "--run", "tiny", "--json").Output()
	if err != nil {
		t.Fatalf("pool show: %v\n%s", err, out)
	}
	var pool struct {
		Tasks   int               `json:"tasks"`
		List    []json.RawMessage `json:"task_list"`
		Missing []string          `json:"missing_rows"`
	}
	if err := json.Unmarshal(out, &pool); err != nil || pool.Tasks == 0 || len(pool.List) != pool.Tasks || len(pool.Missing) > 0 {
		t.Errorf("pool show: %v\n%s", err, out)
	}
	for _, f := range []string{s.Report, s.HTML} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	for typ, n := range s.Events {
		if sums[1].Events[typ] != n {
			t.Errorf("the second run changed %s: %d → %d", typ, n, sums[1].Events[typ])
		}
	}
	// Re-score the run's attempts into a branch: rewards only.
	out, err = command(t, data, cfg, "replay", "--stage", "reward", "--run", "tiny", "--into", "tiny-rescored", "--json").Output()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	var res struct{ Inputs, Emitted, Failed int }
	if err := json.Unmarshal(out, &res); err != nil || uint64(res.Inputs) != s.Events["rollout.completed"] || res.Emitted != res.Inputs || res.Failed != 0 {
		t.Fatalf("replay: %+v %v %s", res, err, out)
	}
	st, err := readStatus(t, data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	branch := 0
	for _, e := range st.Events {
		if e.Type == "reward.scored" {
			branch += int(e.Count)
		}
	}
	if uint64(branch) != 2*s.Events["reward.scored"] {
		t.Fatalf("%d reward.scored across runs after the replay, want %d", branch, 2*s.Events["reward.scored"])
	}
	// A batch job of one stage exits 0 when nothing is left; a second job
	// of a stage that must run once (control) does not start while the
	// first holds its lease, and exits 4.
	if out, err := command(t, data, cfg, "worker", "--stage", "reward", "--until-idle", "--idle", "1s").CombinedOutput(); err != nil {
		t.Fatalf("idle worker: %v\n%s", err, out)
	}
	holder := command(t, data, cfg, "worker", "--stage", "control")
	var holderErr bytes.Buffer
	holder.Stderr = &holderErr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Signal(syscall.SIGINT); holder.Wait() }()
	// The holder serves the embedded data directory; a job started before
	// it would own it (and take the lease) itself.
	waitOwner(t, data, holder.Process.Pid)
	checkFor(t, 60*time.Second, func() error {
		out, err := command(t, data, cfg, "worker", "--stage", "control", "--until-idle", "--idle", "1s").CombinedOutput()
		if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 4 || !bytes.Contains(out, []byte("leased by another holder")) {
			return fmt.Errorf("second worker of a leased stage: %v: %s (holder: %s)", err, out, holderErr.String())
		}
		return nil
	})
	// A report beside the serving holder, with the branch as a variant.
	checkReport(t, data, cfg)
	atif := t.TempDir()
	if out, err := command(t, data, cfg, "export", "atif", "--run", "tiny", "--out", atif).CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	// Harbor's layout: jobs of trials, one trial (its trajectory and its
	// result) per attempt.
	files, _ := filepath.Glob(filepath.Join(atif, "*", "*", "agent", "trajectory.json"))
	results, _ := filepath.Glob(filepath.Join(atif, "*", "*", "result.json"))
	if uint64(len(files)) != s.Events["rollout.completed"] || len(results) != len(files) {
		t.Fatalf("%d ATIF trajectories and %d trial results for %d attempts", len(files), len(results), s.Events["rollout.completed"])
	}
}

// checkReport runs `t1 report` on the tiny run with its re-scored branch
// as a variant and checks the page: a plot per figure, the expected
// tables, nothing fetched, and the same files in the store.
func checkReport(t *testing.T, data, cfg string) {
	t.Helper()
	dir := t.TempDir()
	out, err := command(t, data, cfg, "report", "--run", "tiny", "--compare", "tiny-rescored", "--out", dir, "--json").Output()
	if err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	var files struct {
		Report  string `json:"report"`
		HTML    string `json:"report_html"`
		HTMLKey string `json:"report_html_key"`
	}
	if err := json.Unmarshal(out, &files); err != nil || filepath.Dir(files.HTML) != dir || files.HTMLKey != keys.ReportHTML("tiny") {
		t.Fatalf("report: %+v %v %s", files, err, out)
	}
	page, err := os.ReadFile(files.HTML)
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(files.Report)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"pool-categories", "reward", "explained-variance", "logprob-gap", "drift-repairs", "turns",
		"eval-builtin", "eval-builtin-difficulty", "eval-builtin-category"} {
		if !bytes.Contains(page, []byte(`<figure id="fig-`+id+"\">\n<svg")) {
			t.Errorf("report.html: figure %s has no plot", id)
		}
	}
	for _, want := range []string{"<h2>Training</h2>", "<h2>Evaluation</h2>", "<h2>Variants</h2>", "<th>tiny-rescored</th>", "<td>reward.scored</td>"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	if regexp.MustCompile(`(?i)(src|href)\s*=\s*"?(https?:)?//|url\(\s*['"]?(https?:)?//|@import`).Match(page) {
		t.Error("report.html fetches something from the network")
	}
	for _, want := range []string{"# t1 run tiny", "| run.completed | 1 |", "| routing replay | on | unknown |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	stored, _ := filepath.Glob(filepath.Join(data, "s3", "*", filepath.FromSlash(keys.ReportHTML("tiny"))))
	if len(stored) != 1 {
		t.Fatalf("stored report.html: %v", stored)
	}
	if obj, err := os.ReadFile(stored[0]); err != nil || !bytes.Equal(obj, page) {
		t.Errorf("the stored report.html differs from %s: %v", files.HTML, err)
	}
}

// `t1 run` interrupted mid-iteration stops cleanly and, run again, ends
// the run with every decision taken once and no attempt played twice.
func TestRunPipelineInterruptResume(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(cfg, []byte(tinyPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	first := command(t, data, cfg, "run", "--log-level", "warn")
	var stderr bytes.Buffer
	first.Stderr = &stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	waitOwner(t, data, first.Process.Pid)
	checkFor(t, 90*time.Second, func() error {
		s, err := readStatus(t, data, cfg)
		if err != nil {
			return err
		}
		if s.count("rollout.requested") == 0 {
			return fmt.Errorf("no rollout yet")
		}
		return nil
	})
	if err := first.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		// Interrupted before its end, a run exits 5: run it again to resume.
		if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 5 {
			t.Fatalf("interrupted run: %v, want exit status 5\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		first.Process.Kill()
		t.Fatalf("run did not stop on SIGINT\n%s", stderr.String())
	}
	out, err := command(t, data, cfg, "run", "--json", "--log-level", "warn").Output()
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out)
	}
	var sum struct {
		Status string            `json:"status"`
		Events map[string]uint64 `json:"events"`
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if sum.Status != "completed" {
		t.Fatalf("resumed run ended %s: %+v", sum.Status, sum.Events)
	}
	for _, typ := range []string{"run.started", "pool.sealed", "batch.ready", "critic.updated", "policy.updated", "run.completed"} {
		if sum.Events[typ] != 1 {
			t.Errorf("%d %s events after a resume, want 1", sum.Events[typ], typ)
		}
	}
	if sum.Events["rollout.completed"] != sum.Events["rollout.requested"] || sum.Events["reward.scored"] != sum.Events["rollout.completed"] {
		t.Errorf("attempts requested %d, completed %d, scored %d", sum.Events["rollout.requested"], sum.Events["rollout.completed"], sum.Events["reward.scored"])
	}
	// The run is this configuration's: another one under its id is
	// refused, not shown the completed run's figures as its own.
	other := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(other, []byte(strings.Replace(tinyPipeline, "sft_steps: 2", "sft_steps: 3", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = command(t, data, other, "run", "--log-level", "warn").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "run tiny was started from another configuration") {
		t.Fatalf("run tiny under another configuration: %v\n%s", err, out)
	}
}

// toolsReadAlike reads every table of a finished run in the embedded
// store under data whole, hive partitioning on, with pyarrow's dataset
// API, polars and DuckDB, and as `t1 query --format arrow` prints it: the
// same columns (none twice), types and rows, as many as the digest counts.
func toolsReadAlike(t *testing.T, data, cfg, run string, rows map[string]int64) {
	t.Helper()
	py := testinfra.Python(t)
	dirs, _ := filepath.Glob(filepath.Join(data, "s3", "*", "runs", run))
	if len(dirs) != 1 {
		t.Fatalf("run directories %v", dirs)
	}
	qdir := t.TempDir()
	tables := []string{"tasks", "audits", "trajectories", "turns", "tokens", "routing", "rewards", "values", "metrics", "eval_results"}
	for _, tb := range tables {
		out, err := command(t, data, cfg, "query", tb, "--run", run, "--format", "arrow").Output()
		if err != nil {
			t.Fatalf("query %s: %v", tb, err)
		}
		if err := os.WriteFile(filepath.Join(qdir, tb+".arrow"), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(py, append([]string{"../schemas/testdata/arrow_tools.py", "--tables", dirs[0], qdir}, tables...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("arrow tools: %v: %s", err, stderr.Bytes())
	}
	type read struct {
		Columns, Types, Rows []string
	}
	var got map[string]map[string]read
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		want := got[tb]["t1"]
		if int64(len(want.Rows)) != rows[tb] {
			t.Errorf("%s: t1 query read %d rows, the digest counts %d", tb, len(want.Rows), rows[tb])
		}
		seen := map[string]bool{}
		for _, c := range want.Columns {
			if seen[c] {
				t.Errorf("%s: column %s twice", tb, c)
			}
			seen[c] = true
		}
		for _, tool := range []string{"pyarrow", "polars", "duckdb"} {
			r := got[tb][tool]
			if !slices.Equal(r.Columns, want.Columns) || !slices.Equal(r.Types, want.Types) || !slices.Equal(r.Rows, want.Rows) {
				t.Errorf("%s: %s reads columns %v types %v and %d rows; t1 query %v %v and %d rows", tb, tool, r.Columns, r.Types, len(r.Rows),
					want.Columns, want.Types, len(want.Rows))
			}
		}
	}
}
