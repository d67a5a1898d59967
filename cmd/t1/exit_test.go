package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/local"
)

// Every way a job can end maps to the exit code README's table gives it.
func TestExitCodes(t *testing.T) {
	t.Parallel()
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
		{"version", []string{"version"}, exit.OK},
		{"unknown flag", []string{"worker", "--stage", "rollout", "--bogus"}, exit.Config},
		{"unknown command", []string{"wrok"}, exit.Config},
		{"worker without a stage", []string{"worker"}, exit.Config},
		{"invalid configuration", []string{"worker", "--stage", "rollout", "--config", invalid, "--data", data}, exit.Config},
		{"missing configuration", []string{"run", "--config", data + "/none.yaml", "--data", data}, exit.Config},
		{"eval without a suite", []string{"eval", "--run", "r", "--policy", "v0", "--data", data}, exit.Config},
		{"eval of a bad version", []string{"eval", "--run", "r", "--policy", "latest", "--suite", "builtin", "--data", data}, exit.Config},
		{"eval of an unknown suite", []string{"eval", "--run", "r", "--policy", "v0", "--suite", "nope", "--data", data}, exit.Config},
		{"bus unreachable", []string{"worker", "--stage", "rollout", "--config", unreachable, "--data", data}, exit.Infra},
		{"bus unreachable for eval", []string{"eval", "--run", "r", "--policy", "v0", "--suite", "builtin", "--config", unreachable, "--data", data}, exit.Infra},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := t1(t, tc.args...)
			if got := exit.Code(context.Background(), err); got != tc.want {
				t.Fatalf("t1 %s: exit %d (%v), want %d\n%s", strings.Join(tc.args, " "), got, err, tc.want, out)
			}
		})
	}
}

// A second process that wants a leased stage exits 4, naming the holder,
// while any number of workers of an unleased stage may run.
func TestLeasedStageIsBusy(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	cfg := writeConfig(t, "run:\n  id: lease\n")
	ctx := context.Background()
	in := connectTo(t, data, cfg)
	ls, err := in.Log.AcquireLease(ctx, "stage-control", "another process", engine.DefaultLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(context.Background())
	out, err := t1(t, "worker", "--stage", "control", "--json", "--config", cfg, "--data", data, "--log-level", "error")
	if got := exit.Code(context.Background(), err); got != exit.Busy || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("worker of a leased stage: exit %d (%v), want %d naming the holder\n%s", got, err, exit.Busy, out)
	}
	if !strings.Contains(out, `"exit_code": 4`) {
		t.Fatalf("summary without the exit code: %s", out)
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
	in, err := local.Open(context.Background(), c, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in
}
