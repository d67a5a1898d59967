package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/local"
)

// Every way a job can end maps to the exit code README's table gives it.
func TestExitCodes(t *testing.T) {
	// A port nothing listens on: the bus is unreachable.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	unreachable := writeConfig(t, fmt.Sprintf("bus:\n  mode: external\n  external:\n    urls: [nats://%s]\n", dead))
	invalid := writeConfig(t, "engine:\n  concurrency: 8\n  max_ack_pending: 2\n")
	data := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"version", []string{"version"}, exitOK},
		{"unknown flag", []string{"worker", "--stage", "rollout", "--bogus"}, exitConfig},
		{"unknown command", []string{"wrok"}, exitConfig},
		{"worker without a stage", []string{"worker"}, exitConfig},
		{"invalid configuration", []string{"worker", "--stage", "rollout", "--config", invalid, "--data", data}, exitConfig},
		{"missing configuration", []string{"run", "--config", data + "/none.yaml", "--data", data}, exitConfig},
		{"eval without a suite", []string{"eval", "--run", "r", "--policy", "v0", "--data", data}, exitConfig},
		{"eval of a bad version", []string{"eval", "--run", "r", "--policy", "latest", "--suite", "builtin", "--data", data}, exitConfig},
		{"eval of an unknown suite", []string{"eval", "--run", "r", "--policy", "v0", "--suite", "nope", "--data", data}, exitConfig},
		{"bus unreachable", []string{"worker", "--stage", "rollout", "--config", unreachable, "--data", data}, exitInfra},
		{"bus unreachable for eval", []string{"eval", "--run", "r", "--policy", "v0", "--suite", "builtin", "--config", unreachable, "--data", data}, exitInfra},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := t1(t, tc.args...)
			if got := exitCode(context.Background(), err); got != tc.want {
				t.Fatalf("t1 %s: exit %d (%v), want %d\n%s", strings.Join(tc.args, " "), got, err, tc.want, out)
			}
		})
	}
}

// A second process that wants a leased stage exits 4, naming the holder,
// while any number of workers of an unleased stage may run.
func TestLeasedStageIsBusy(t *testing.T) {
	data := t.TempDir()
	cfg := writeConfig(t, "run:\n  id: lease\n")
	ctx := context.Background()
	in := connectTo(t, data, cfg)
	ls, err := in.Log.AcquireLease(ctx, "stage-control", "another process", defaultLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(context.Background())
	out, err := t1(t, "worker", "--stage", "control", "--json", "--config", cfg, "--data", data, "--log-level", "error")
	if got := exitCode(context.Background(), err); got != exitBusy || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("worker of a leased stage: exit %d (%v), want %d naming the holder\n%s", got, err, exitBusy, out)
	}
	if !strings.Contains(out, `"exit_code": 4`) {
		t.Fatalf("summary without the exit code: %s", out)
	}
}

// Control and eval are single per run: processes of two runs hold their
// leases at once, while a second process of one of those runs, or one
// that would run the stage for every run, exits 4 naming the holder.
func TestLeasesArePerRun(t *testing.T) {
	data := t.TempDir()
	cfg := writeConfig(t, "run:\n  id: ra\n")
	// The leases' renewals end with the test, before its connection closes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := connectTo(t, data, cfg)
	serial := []engine.Stage{engine.NewStage("control", nil, nil), engine.NewStage("eval", nil, nil)}
	for _, run := range []string{"ra", "rb"} {
		release, err := holdLeases(ctx, in.Log, serial, run, defaultLeaseTTL, func(err error) { t.Errorf("lease of run %s lost: %v", run, err) })
		if err != nil {
			t.Fatalf("leases of run %s beside the other run's: %v", run, err)
		}
		defer release()
	}
	if _, err := holdLeases(ctx, in.Log, serial[1:], "ra", defaultLeaseTTL, func(error) {}); !errors.Is(err, engine.ErrLeased) {
		t.Fatalf("eval of run ra taken twice: %v", err)
	}
	holder := fmt.Sprintf("pid %d", os.Getpid())
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"control of a run held", []string{"--stage", "control", "--run", "ra"}, exitBusy},
		{"eval of a run held", []string{"--stage", "eval", "--run", "rb"}, exitBusy},
		{"control of every run", []string{"--stage", "control"}, exitBusy},
		{"a shared stage of one run", []string{"--stage", "rollout", "--run", "ra"}, exitConfig},
		{"a bad run", []string{"--stage", "control", "--run", "Not_A_Run"}, exitConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"worker", "--until-idle", "--idle", "1s", "--config", cfg, "--data", data, "--log-level", "error"}, tc.args...)
			out, err := t1(t, args...)
			if got := exitCode(context.Background(), err); got != tc.want {
				t.Fatalf("t1 %s: exit %d (%v), want %d\n%s", strings.Join(args, " "), got, err, tc.want, out)
			}
			if tc.want == exitBusy && !strings.Contains(err.Error(), holder) {
				t.Fatalf("refused without naming the holder (%s): %v", holder, err)
			}
		})
	}
	// A run no process holds is free.
	out, err := t1(t, "worker", "--stage", "control", "--run", "rc", "--until-idle", "--idle", "1s", "--json", "--config", cfg, "--data", data, "--log-level", "error")
	if err != nil || !strings.Contains(out, `"lease": "stage-control.rc"`) || !strings.Contains(out, `"status": "idle"`) {
		t.Fatalf("control of a run nobody holds: %v\n%s", err, out)
	}
}

// connectTo connects to the data directory's infrastructure as a t1
// process does, for the test's length.
func connectTo(t *testing.T, data, cfg string) *local.Infra {
	t.Helper()
	c, err := (&globals{configPath: cfg, dataDir: data}).load()
	if err != nil {
		t.Fatal(err)
	}
	in, err := connect(context.Background(), c, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in
}
