package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Without a cgroup (sandbox.limits.cgroup: optional on a host that has
// none) nothing would bound the tasks of a sandbox whose root can become
// many users, RLIMIT_NPROC counting each uid apart: the sandbox keeps a
// single id, and its Reason says why.
func TestBwrapWithoutCgroupKeepsOneID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a sandbox has a block of ids only when t1 runs as root")
	}
	bw := &Bubblewrap{}
	if err := bw.Available(); err != nil {
		t.Skip(err)
	}
	saved := cgroupHostOnce
	defer func() { cgroupHostOnce = saved }()
	cgroupHostOnce = func() cgroupHost { return cgroupHost{err: errors.New("no cgroup here")} }
	sb, err := bw.Start(context.Background(), Spec{Limits: Limits{Cgroup: CgroupOptional}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if why := sb.Info().Reason; !strings.Contains(why, "one user, root (uid 0) without capabilities") || !strings.Contains(why, "no cgroup") {
		t.Errorf("Reason %q does not say the sandbox has one user, and why", why)
	}
	r, err := sb.Exec(context.Background(), Cmd{Script: "id -u; touch /app/x; chown 1000 /app/x && echo CHOWNED; grep CapEff /proc/self/status"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "0\nCapEff:\t0000000000000000\n" {
		t.Errorf("a sandbox without a cgroup has users: %+v", r)
	}
}

// A block is held host-wide: another process, whatever its TMPDIR, finds
// its lock taken while the sandbox lives, and free once it is released.
// With the locks under TMPDIR, a t1 with a TMPDIR of its own drew blocks
// other t1 processes held, and one sandbox's Close killed another's
// verifier.
func TestBlockLockIsHostWide(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a sandbox has a block of ids only when t1 runs as root")
	}
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1) to take the lock from another process:", err)
	}
	t.Setenv("TMPDIR", t.TempDir())
	base, release, err := allocBlock()
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(blockLocks, "block-"+strconv.Itoa(base))
	other := func() error {
		cmd := exec.Command("flock", "--nonblock", "--conflict-exit-code", "3", lock, "true")
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
		return cmd.Run()
	}
	var exit *exec.ExitError
	if err := other(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("another process took the lock of a held block (%v)", err)
	}
	release()
	if err := other(); err != nil {
		t.Errorf("a released block stays locked: %v", err)
	}
}

// A free lock is not enough: a block that a live process still runs as
// (a sandbox of a t1 killed with SIGKILL, not yet reaped) is skipped.
func TestBlockWithProcessesIsSkipped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "locks")
	first := blockBase
	busy := func(base int) bool { return base == first }
	seen := map[int]bool{}
	for range 20 {
		base, release, err := allocBlockIn(dir, 2, busy)
		if err != nil {
			t.Fatal(err)
		}
		seen[base] = true
		release()
	}
	if seen[first] || !seen[first+IDBlock] {
		t.Errorf("drew blocks %v, want only %d", seen, first+IDBlock)
	}
	if _, _, err := allocBlockIn(dir, 1, busy); err == nil {
		t.Error("drew the only block, which has processes")
	}
	if os.Geteuid() != 0 {
		t.Skip("running a process as a block's uid takes root")
	}
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(first + 1000), Gid: uint32(first + 1000)}}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	if !blockHasProcesses(first) {
		t.Error("a process running as uid base+1000 is not seen as the block's")
	}
	sleep.Process.Kill()
	sleep.Wait()
	if blockHasProcesses(first) {
		t.Error("the block still has processes after its only one ended")
	}
}
