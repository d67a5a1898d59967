package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := &globals{configPath: cfg, dataDir: data}
	c, err := g.load()
	if err != nil {
		t.Fatal(err)
	}
	in, err := connect(ctx, c, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
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
