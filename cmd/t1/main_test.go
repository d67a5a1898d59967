package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/execute"
	"github.com/t1pipe/t1/exit"
)

// t1 runs the command in process, as a user would from a shell.
func t1(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out lockedBuffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunDemoEndToEndAndResume(t *testing.T) {
	data := t.TempDir()
	cfg := writeConfig(t, "run:\n  id: e2e\nstages:\n  demo:\n    count: 25\n    payload_bytes: 1000\n")
	var sums [2]execute.DemoSummary
	for i := range sums {
		out, err := t1(t, "demo", "--json", "--data", data, "--config", cfg, "--log-level", "warn")
		if err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &sums[i]); err != nil {
			t.Fatalf("summary: %v\n%s", err, out)
		}
	}
	for i, s := range sums {
		if s.Verified != 25 || s.Produced != 25 || s.Failed != 0 || s.Dead != 0 {
			t.Fatalf("run %d summary %+v", i, s)
		}
	}
	report, err := os.ReadFile(sums[0].Report)
	if err != nil || !strings.Contains(string(report), "| verified | 25 |") {
		t.Fatalf("report %q: %v", report, err)
	}
	out, err := t1(t, "status", "--json", "--data", data, "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var st engine.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// A resumed run must not have added a single event.
	if st.Streams[0].Messages != 52 {
		t.Fatalf("stream holds %d events, want 1 + 1 chunk + 25 + 25", st.Streams[0].Messages)
	}
	for _, c := range st.Consumers {
		if c.Pending != 0 || c.AckPending != 0 {
			t.Fatalf("consumer %+v still has work", c)
		}
	}
	out, err = t1(t, "events", "list", "--data", data, "--config", cfg, "--run", "e2e", "--type", "demo.verified", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n != 25 {
		t.Fatalf("events list printed %d lines", n)
	}
}

func TestBadConfigIsOneLine(t *testing.T) {
	cfg := writeConfig(t, "run:\n  id: x\nsotre:\n  bucket: b\n")
	_, err := t1(t, "status", "--data", t.TempDir(), "--config", cfg)
	if err == nil {
		t.Fatal("unknown key accepted")
	}
	msg := exit.Line(err)
	if !strings.HasPrefix(msg, cfg+":3:1:") || !strings.Contains(msg, `"store"`) {
		t.Fatalf("error %q", msg)
	}
}

func TestUnreachableServersAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"nats", "bus:\n  mode: external\n  external:\n    urls: [nats://127.0.0.1:1]\n",
			"bus: cannot connect to NATS at nats://127.0.0.1:1: connection refused"},
		{"s3", "store:\n  mode: external\n  bucket: t1-data\n  external:\n    endpoint: 127.0.0.1:1\n    secure: false\n",
			"127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", "k")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
			_, err := t1(t, "run", "--data", t.TempDir(), "--config", writeConfig(t, tc.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) || len(msg) > 200 {
				t.Fatalf("error %q", msg)
			}
		})
	}
}

// Input the producer refuses becomes a failed event, a non-zero exit and
// a hint naming where the reason is.
func TestHostileDemoInputFails(t *testing.T) {
	data := t.TempDir()
	cfg := writeConfig(t, "run:\n  id: bad\nstages:\n  demo:\n    count: 3\n    payload_bytes: 70000000\n")
	_, err := t1(t, "demo", "--data", data, "--config", cfg, "--log-level", "error")
	if err == nil || !strings.Contains(err.Error(), "t1 events list --run bad --type demo.started.failed") {
		t.Fatalf("error %v", err)
	}
	out, err := t1(t, "events", "list", "--data", data, "--config", cfg, "--run", "bad", "--type", "demo.started.failed", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `payload_bytes 70000000`) {
		t.Fatalf("failed event lacks the reason: %s", out)
	}
}
