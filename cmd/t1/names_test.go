package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/usage"
)

// Every command that names a run, table, column, event type, stage,
// policy version or command that does not exist exits 2 with one line
// naming what exists, the closest first. The data directory holds a demo
// run (wk: events only), a run of tables alone (q, as t1 tasks import
// leaves one) and a started run with no policy of its own (pv).
func TestWrongNamesExit2NamingWhatExists(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	cfg := writeConfig(t, "run:\n  id: wk\nstages:\n  demo:\n    count: 2\n    payload_bytes: 10\n")
	if out, err := t1(t, "demo", "--data", data, "--config", cfg, "--log-level", "error"); err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	seedTables(t, data)
	in := connectTo(t, data, cfg)
	ev, err := engine.NewRootEvent("pv", schemas.RunStarted, "pv", schemas.RunStartedPayload{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Log.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"query", "rewards", "--run", "nosuchrun"}, `unknown run "nosuchrun" (runs: `},
		{[]string{"query", "rewards", "--run", "WK"}, `unknown run "WK" (runs: wk, `},
		{[]string{"query", "rewards", "--run", "a/b"}, `unknown run "a/b" (runs: `},
		{[]string{"query", "rewards"}, `--run is required`},
		{[]string{"query", "reward", "--run", "q"}, `unknown table "reward" (tables: rewards, `},
		{[]string{"query", "rewards", "--run", "q", "--select", "task_id,rewrd"}, `--select: unknown column "rewrd" (columns of rewards: reward, `},
		{[]string{"query", "rewards", "--run", "q", "--where", "rewrd > 1"}, `--where: unknown column "rewrd" (columns of rewards: reward, `},
		{[]string{"query", "rewards", "--run", "q", "--where", "purpose = eval"}, `quote text: purpose = 'eval'`},
		{[]string{"query", "rewards", "--run", "q", "--format", "yaml"}, `unknown format "yaml" (formats: `},
		{[]string{"events", "list", "--run", "nosuch"}, `unknown run "nosuch" (runs: `},
		{[]string{"events", "tail", "--run", "nosuch"}, `unknown run "nosuch" (runs: `},
		{[]string{"events", "list", "--type", "demo.verifed"}, `unknown event type "demo.verifed" (event types: demo.verified, `},
		{[]string{"events", "list", "--run", "wk", "--type", "eval.complete"}, `unknown event type "eval.complete" (event types: eval.completed, `},
		{[]string{"report", "--run", "wk", "--compare", "nosuch"}, `unknown run "nosuch" (runs: `},
		{[]string{"digest", "--run", "nosuch"}, `unknown run "nosuch" (runs: `},
		{[]string{"ui", "--run", "nosuch", "--addr", "127.0.0.1:0"}, `unknown run "nosuch" (runs: `},
		{[]string{"ui", "--addr", "localhost"}, `ui: --addr "localhost": `},
		{[]string{"pool", "show", "--run", "nosuch"}, `unknown run "nosuch" (runs: `},
		{[]string{"export", "atif", "--run", "nosuch", "--out", out}, `unknown run "nosuch" (runs: `},
		{[]string{"tasks", "export", "--run", "nosuch", "--out", out}, `unknown run "nosuch" (runs: `},
		{[]string{"replay", "--stage", "reward", "--run", "nosuch", "--into", "b"}, `unknown run "nosuch" (runs: `},
		{[]string{"replay", "--stage", "rewrd", "--run", "wk", "--into", "b"}, `unknown stage "rewrd" (stages: reward, `},
		{[]string{"worker", "--stage", "rolout"}, `unknown stage "rolout" (stages: rollout, `},
		{[]string{"eval", "--run", "nosuch", "--policy", "v0", "--suite", "builtin"}, `unknown run "nosuch" (runs: `},
		{[]string{"eval", "--run", "pv", "--policy", "v7", "--suite", "builtin"}, `unknown policy version "v7" (policy versions of run pv: v0)`},
		{[]string{"qurey"}, `unknown command "qurey" (commands of t1: query, `},
		{[]string{"events", "lsit"}, `unknown command "lsit" (commands of t1 events: list, `},
	} {
		args := append(tc.args, "--data", data, "--config", cfg, "--log-level", "error")
		got, err := t1(t, args...)
		code := exit.Code(context.Background(), err)
		if code != exit.Config || err == nil || !strings.Contains(exit.Line(err), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("t1 %s: exit %d, %v; want exit 2 and %q\n%s", strings.Join(tc.args, " "), code, err, tc.want, got)
		}
	}
}

// Under --json an error is one JSON object with its exit code.
func TestErrorsUnderJSON(t *testing.T) {
	t.Parallel()
	root := newRoot()
	root.SetArgs([]string{"query", "rewards", "--run", "q", "--json", "--format", "yaml"})
	root.SetOut(&strings.Builder{})
	err := root.ExecuteContext(context.Background())
	var b strings.Builder
	usage.PrintError(&b, err, exit.Code(context.Background(), err), usage.WantsJSON(root, nil))
	var e struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	if jerr := json.Unmarshal([]byte(b.String()), &e); jerr != nil || e.ExitCode != exit.Config || !strings.Contains(e.Error, `unknown format "yaml"`) ||
		strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("%v: %q", jerr, b.String())
	}
}

// Every command's help has an example, and t1 --help lists the commands
// under what users do with them.
func TestHelpHasExamplesAndGroups(t *testing.T) {
	t.Parallel()
	root := newRoot()
	if missing := usage.Missing(root); len(missing) > 0 {
		t.Fatalf("commands without an example: %v", missing)
	}
	out, err := t1(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range usage.Groups {
		if !strings.Contains(out, g.Title) {
			t.Errorf("t1 --help lacks %q:\n%s", g.Title, out)
		}
	}
	if i, j := strings.Index(out, "Query and export tables:"), strings.Index(out, "  query "); i < 0 || j < i {
		t.Fatalf("query is not under its group:\n%s", out)
	}
}
