package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/internal/testinfra"
)

// hostPoints are where `t1 run` kills itself (hostres.Point, T1_KILL_AT)
// for TestCrashLeavesNothingOnHost: inside a sandbox's life, with its
// tmpfs, cgroup and directories in place. An image build is not among
// them: the tiny pipeline runs on the host's system directories
// (TestImageBuildKilledLeavesNothingOnHost kills a build).
var hostPoints = []struct {
	point, phase string
	quick        bool
}{
	{"sandbox.shell", "a rollout's command", true},
	{"sandbox.snapshot", "a snapshot", false},
	{"trial.verifier", "the verifier's sandbox", false},
}

// recordedBy lists what the t1 process pid recorded (hostres) and still
// exists.
func recordedBy(t *testing.T, pid int) []hostres.Resource {
	t.Helper()
	l, err := hostres.List()
	if err != nil {
		t.Fatal(err)
	}
	var out []hostres.Resource
	for _, h := range l.Owners {
		if h.Owner.PID != pid {
			continue
		}
		for _, r := range h.Resources {
			if r.Exists {
				out = append(out, r)
			}
		}
	}
	return out
}

// requireGone fails t if the registry still knows process pid or any of
// what it recorded is on the host: a path, a mount or a cgroup.
func requireGone(t *testing.T, pid int, left []hostres.Resource) {
	t.Helper()
	l, err := hostres.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range l.Owners {
		if h.Owner.PID == pid {
			t.Errorf("the registry still holds killed process %d: %+v", pid, h.Resources)
		}
	}
	mountinfo, _ := os.ReadFile("/proc/self/mountinfo")
	for _, r := range left {
		if _, err := os.Lstat(r.Path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("left on the host: %s %s (%v)", r.Kind, r.Path, err)
		}
		if r.Kind == hostres.Mount && bytes.Contains(mountinfo, []byte(" "+r.Path+" ")) {
			t.Errorf("still mounted: %s", r.Path)
		}
	}
}

// TestCrashLeavesNothingOnHost kills `t1 run` with SIGKILL inside a
// sandbox's life and checks that the next `t1 run` removes every mount,
// cgroup and directory the killed process recorded, and that the run's
// artifacts are those of an uninterrupted run. T1_CRASH_POINTS=all runs
// every point; make test runs the first.
func TestCrashLeavesNothingOnHost(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	want := baselineDigest(t)
	all := os.Getenv("T1_CRASH_POINTS") == "all"
	for _, p := range hostPoints {
		if !p.quick && !all {
			continue
		}
		t.Run(p.point, func(t *testing.T) {
			t0 := time.Now()
			data, cfg := t.TempDir(), writeConfig(t, equalPipeline)
			first := killable(t, command(t, data, cfg, "run", "--log-level", "warn"))
			first.Env = append(first.Env, "T1_KILL_AT="+p.point)
			var stderr bytes.Buffer
			first.Stderr = &stderr
			if err := first.Start(); err != nil {
				t.Fatal(err)
			}
			timer := time.AfterFunc(4*time.Minute, func() { first.Process.Kill() })
			err := first.Wait()
			timer.Stop()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("t1 run did not stop at %s: %v\n%s", p.point, err, stderr.String())
			}
			left := recordedBy(t, first.Process.Pid)
			var kinds []string
			for _, r := range left {
				kinds = append(kinds, string(r.Kind)+" "+r.FS)
			}
			// The point lies inside a sandbox's life: its directory is
			// there, and as root its tmpfs and cgroup too.
			if !strings.Contains(strings.Join(kinds, ","), "dir") || os.Geteuid() == 0 && !strings.Contains(strings.Join(kinds, ","), "mount tmpfs") {
				t.Fatalf("killed at %s, the process had recorded %q: not inside a sandbox", p.point, kinds)
			}
			completeRun(t, data, cfg)
			requireGone(t, first.Process.Pid, left)
			sameDigest(t, want, readDigest(t, data, cfg))
			t.Logf("killed during %s holding %s; after the restart none left; digest equal; %s",
				p.phase, kindCounts(left), time.Since(t0).Round(time.Second))
		})
	}
}

// TestTermLeavesNothingOnHost stops `t1 run` with SIGTERM while it holds
// sandboxes and checks that it removed everything it recorded before it
// exited, with no next start to do it.
func TestTermLeavesNothingOnHost(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	data, cfg := t.TempDir(), writeConfig(t, equalPipeline)
	run := killable(t, command(t, data, cfg, "run", "--log-level", "warn"))
	var stderr bytes.Buffer
	run.Stderr = &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	var held []hostres.Resource
	for end := time.Now().Add(3 * time.Minute); len(held) == 0; time.Sleep(20 * time.Millisecond) {
		for _, r := range recordedBy(t, run.Process.Pid) {
			if r.Kind == hostres.Dir && strings.Contains(r.Path, "t1-sandbox-") {
				held = recordedBy(t, run.Process.Pid)
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("t1 run ended before it held a sandbox: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(end) {
			t.Fatal("t1 run held no sandbox within 3 minutes")
		}
	}
	if err := run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		run.Process.Kill()
		t.Fatalf("t1 run did not end after SIGTERM\n%s", stderr.String())
	}
	requireGone(t, run.Process.Pid, held)
	t.Logf("stopped with SIGTERM holding %s; none left after it exited", kindCounts(held))
}

// kindCounts says how many resources of each kind rs holds.
func kindCounts(rs []hostres.Resource) string {
	n := map[string]int{}
	var order []string
	for _, r := range rs {
		k := string(r.Kind)
		if r.FS != "" {
			k += " " + r.FS
		}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	var out []string
	for _, k := range order {
		out = append(out, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(out, ", ")
}

// TestImageBuildKilledLeavesNothingOnHost kills `t1 image build` with
// SIGKILL while a layer's build root is mounted, and checks that the next
// start (`t1 sandbox reap`, as every command that makes sandboxes does on
// start) removes every mount and directory it recorded, and that the build
// then finishes in the same cache.
func TestImageBuildKilledLeavesNothingOnHost(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("image builds mount overlays: root only")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		if _, err := exec.LookPath("/usr/sbin/debootstrap"); err != nil {
			t.Skip("debootstrap unavailable (make setup installs it)")
		}
	}
	data, cfg, cache := t.TempDir(), writeConfig(t, equalPipeline), t.TempDir()
	task, err := filepath.Abs(filepath.Join("..", "harbor", "testdata", "tasks", "log-rotate"))
	if err != nil {
		t.Fatal(err)
	}
	build := killable(t, command(t, data, cfg, "image", "build", task, "--cache", cache))
	build.Env = append(build.Env, "T1_KILL_AT=image.build")
	var stderr bytes.Buffer
	build.Stderr = &stderr
	err = build.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("t1 image build did not stop at image.build: %v\n%s", err, stderr.String())
	}
	left := recordedBy(t, build.Process.Pid)
	if !strings.Contains(kindCounts(left), "mount") {
		t.Fatalf("killed inside a build, the process had recorded %s: no build root mounted", kindCounts(left))
	}
	if out, err := command(t, data, cfg, "sandbox", "reap").CombinedOutput(); err != nil {
		t.Fatalf("reap: %v\n%s", err, out)
	}
	requireGone(t, build.Process.Pid, left)
	if out, err := command(t, data, cfg, "image", "build", task, "--cache", cache).CombinedOutput(); err != nil {
		t.Fatalf("the build after the kill: %v\n%s", err, out)
	}
	t.Logf("killed during an image build holding %s; none left after reap; the build then finished", kindCounts(left))
}
