package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/t1pipe/t1/internal/testinfra"
)

var t1Bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "t1-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The long scenarios drive the t1 command; -short runs none of them.
	if !testinfra.Short() {
		if t1Bin, err = testinfra.BuildT1(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(testinfra.HostLeft(code))
}

func command(t *testing.T, data, cfg string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(t1Bin, append(args, "--data", data, "--config", cfg)...)
	cmd.Dir = t.TempDir()
	return cmd
}

// waitOwner waits until process pid serves the data directory: a t1
// process started before it would own the directory itself.
func waitOwner(t *testing.T, data string, pid int) {
	t.Helper()
	checkFor(t, 60*time.Second, func() error {
		raw, err := os.ReadFile(filepath.Join(data, "endpoints.json"))
		if err != nil {
			return err
		}
		var ep struct{ PID int }
		if err := json.Unmarshal(raw, &ep); err != nil || ep.PID != pid {
			return fmt.Errorf("endpoints.json not yet from process %d: %s", pid, raw)
		}
		return nil
	})
}

func checkFor(t *testing.T, total time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s: %v", total, err)
}

type status struct {
	Streams []struct {
		Name     string `json:"name"`
		Messages uint64 `json:"messages"`
	} `json:"streams"`
	Consumers []struct {
		Name       string `json:"name"`
		Pending    uint64 `json:"pending"`
		AckPending int    `json:"ack_pending"`
	} `json:"consumers"`
	Events []struct {
		Run   string `json:"run"`
		Type  string `json:"type"`
		Count uint64 `json:"count"`
	} `json:"events"`
}

// countOf is run's count of typ.
func (s status) countOf(run, typ string) uint64 {
	for _, e := range s.Events {
		if e.Run == run && e.Type == typ {
			return e.Count
		}
	}
	return 0
}

func (s status) consumers() []string {
	var names []string
	for _, c := range s.Consumers {
		names = append(names, c.Name)
	}
	return names
}

func (s status) count(typ string) uint64 {
	for _, e := range s.Events {
		if e.Type == typ {
			return e.Count
		}
	}
	return 0
}

func readStatus(t *testing.T, data, cfg string) (status, error) {
	out, err := command(t, data, cfg, "status", "--json").Output()
	if err != nil {
		return status{}, fmt.Errorf("status: %w: %s", err, out)
	}
	var s status
	return s, json.Unmarshal(out, &s)
}

// A run interrupted with SIGINT stops cleanly (exit 0), another t1 process
// can inspect it meanwhile through the owner's endpoints, and running again
// finishes the work without a duplicate event.
func TestInterruptInspectResume(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "pipeline.yaml")
	const n = 2000
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("run:\n  id: e2e\nstages:\n  demo:\n    count: %d\n    payload_bytes: 512\nengine:\n  concurrency: 2\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}

	first := command(t, data, cfg, "demo")
	var stderr bytes.Buffer
	first.Stderr = &stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()

	// A status started before the run holds the data directory would own it
	// itself; wait until the run has published its endpoints.
	waitOwner(t, data, first.Process.Pid)
	// While it runs, a second process reads its log through endpoints.json.
	checkFor(t, 60*time.Second, func() error {
		s, err := readStatus(t, data, cfg)
		if err != nil {
			return err
		}
		if s.count("demo.verified") == 0 {
			return fmt.Errorf("nothing verified yet")
		}
		return nil
	})
	if err := first.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("interrupted run: %v\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		first.Process.Kill()
		t.Fatalf("run did not stop on SIGINT\n%s", stderr.String())
	}

	out, err := command(t, data, cfg, "demo", "--json").Output()
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out)
	}
	var sum struct {
		Verified, Produced, Failed int
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if sum.Verified != n || sum.Produced != n || sum.Failed != 0 {
		t.Fatalf("summary %+v", sum)
	}
	s, err := readStatus(t, data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(1 + n/50 + 2*n); s.Streams[0].Messages != want {
		t.Fatalf("log holds %d events, want %d: a resumed run duplicated work", s.Streams[0].Messages, want)
	}
	if !strings.Contains(stderr.String(), "run `t1 demo` again to resume") {
		t.Errorf("interrupted run did not say how to resume:\n%s", stderr.String())
	}
}
