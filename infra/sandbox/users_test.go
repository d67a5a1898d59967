package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/sandbox"
)

// ranged starts a bubblewrap sandbox with a block of ids: t1 as root.
func ranged(t *testing.T) sandbox.Sandbox {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a sandbox has a block of ids only when t1 runs as root")
	}
	return confined(t, sandbox.Limits{})
}

// hostIDs reads a process's real uid and gid from the host's /proc.
func hostIDs(t *testing.T, pid int) (uid, gid int) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		switch {
		case k == "Uid" && len(f) > 0:
			uid, _ = strconv.Atoi(f[0])
		case k == "Gid" && len(f) > 0:
			gid, _ = strconv.Atoi(f[0])
		}
	}
	return uid, gid
}

// sandboxProcs waits until the sandbox runs a process whose command line
// begins with marker (so the program it names runs, not the setpriv
// that will exec it), and returns the host's uid of each such process.
func sandboxProcs(t *testing.T, sb sandbox.Sandbox, marker string, n int) map[int]int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		found := map[int]int{}
		for _, pid := range sandbox.FindProcesses(sb.Info().ID, 0) {
			cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			if bytes.HasPrefix(cmd, []byte(marker)) {
				uid, _ := hostIDs(t, pid)
				found[pid] = uid
			}
		}
		if len(found) >= n {
			return found
		}
	}
	t.Fatalf("the sandbox runs no %d processes %q", n, marker)
	return nil
}

// blockOf returns the first host id of the sandbox's block, read from the
// host: the uid of a process that runs as root inside.
func blockOf(t *testing.T, sb sandbox.Sandbox, sh sandbox.Shell, seconds string) int {
	t.Helper()
	if r, err := sh.Run(context.Background(), "sleep "+seconds+" &", sandbox.RunOptions{}); err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	for _, uid := range sandboxProcs(t, sb, "sleep\x00"+seconds, 1) {
		return uid
	}
	return 0
}

// Ids inside are the host ids of the sandbox's own block: root is its
// first, uid 1000 the thousandth after it, and a second sandbox's block
// shares none of them. Each process's ids are read from the host.
func TestBwrapIDsAreTheSandboxesOwnBlock(t *testing.T) {
	t.Parallel()
	a, b := ranged(t), ranged(t)
	ctx := context.Background()
	shA, err := a.Shell(ctx, sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	shB, err := b.Shell(ctx, sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	baseA, baseB := blockOf(t, a, shA, "3100"), blockOf(t, b, shB, "3200")
	for _, base := range []int{baseA, baseB} {
		if base < 1<<30+1<<24 || base+sandbox.IDBlock > 1<<31 || base%sandbox.IDBlock != 0 {
			t.Errorf("root inside is host uid %d: not the start of a block above 2^30+2^24", base)
		}
	}
	if d := baseA - baseB; d > -sandbox.IDBlock && d < sandbox.IDBlock {
		t.Errorf("two sandboxes' blocks overlap: %d and %d", baseA, baseB)
	}
	if r, err := shA.Run(ctx, "setpriv --reuid 1000 --regid 1001 --clear-groups sleep 301 &", sandbox.RunOptions{}); err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	for pid := range sandboxProcs(t, a, "sleep\x00301", 1) {
		if uid, gid := hostIDs(t, pid); uid != baseA+1000 || gid != baseA+1001 {
			t.Errorf("uid 1000 gid 1001 inside is host %d:%d, want %d:%d", uid, gid, baseA+1000, baseA+1001)
		}
		m, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/uid_map")
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(m)); len(f) != 3 || f[0] != "0" || f[1] != strconv.Itoa(baseA) || f[2] != strconv.Itoa(sandbox.IDBlock) {
			t.Errorf("uid_map %q, want 0 %d %d", m, baseA, sandbox.IDBlock)
		}
	}
	// A numeric user of Cmd.User is the same id of the block.
	r := run(t, a, sandbox.Cmd{Script: "id -u; id -g; touch /tmp/u; stat -c %u:%g /tmp/u", User: "1000"})
	if r.Stdout != "1000\n0\n1000:0\n" {
		t.Errorf("User 1000: %+v", r)
	}
	if _, err := a.Exec(ctx, sandbox.Cmd{Args: []string{"true"}, User: strconv.Itoa(sandbox.IDBlock)}); err == nil {
		t.Errorf("user %d, past the block, was accepted", sandbox.IDBlock)
	}
}

// Root inside adds users, gives them files and becomes them, as in a
// Docker container; files keep their owners through a snapshot, which
// records them as the sandbox sees them, into another sandbox's block.
func TestBwrapUsersAndOwnersThroughASnapshot(t *testing.T) {
	t.Parallel()
	sb := ranged(t)
	r := run(t, sb, sandbox.Cmd{Script: `set -e
touch /app/x; chown 1000:1001 /app/x
mkdir /app/d; chown 33:33 /app/d
setpriv --reuid 1000 --regid 1000 --clear-groups sh -c 'id -u; touch /tmp/by-1000'
stat -c %u:%g /app/x /app/d /tmp/by-1000
su -s /bin/sh -c "id -u" nobody`})
	if r.ExitCode != 0 || r.Stdout != "1000\n1000:1001\n33:33\n1000:1000\n65534\n" {
		t.Fatalf("root switching users and chowning: %+v", r)
	}
	var layer bytes.Buffer
	if err := sb.Snapshot(context.Background(), &layer); err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(layer.Bytes()))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		owners[strings.TrimSuffix(h.Name, "/")] = strconv.Itoa(h.Uid) + ":" + strconv.Itoa(h.Gid)
	}
	for name, want := range map[string]string{"app/x": "1000:1001", "app/d": "33:33", "tmp/by-1000": "1000:1000"} {
		if owners[name] != want {
			t.Errorf("layer: %s owned by %q, want %q (the sandbox's ids, not the host's)", name, owners[name], want)
		}
	}
	other := ranged(t)
	if err := other.Restore(context.Background(), bytes.NewReader(layer.Bytes())); err != nil {
		t.Fatal(err)
	}
	if r := run(t, other, sandbox.Cmd{Script: "stat -c %u:%g /app/x /app/d /tmp/by-1000"}); r.Stdout != "1000:1001\n33:33\n1000:1000\n" {
		t.Errorf("restored owners: %+v", r)
	}
}

// A user other than root cannot become root again: bwrap's no_new_privs
// leaves su's setuid bit without effect (so an image's su or sudo rules
// do not raise a user either), and the user has no capability to
// setuid with. Nor can root make a user namespace of its own.
func TestBwrapUserCannotBecomeRoot(t *testing.T) {
	t.Parallel()
	sb := ranged(t)
	r := run(t, sb, sandbox.Cmd{Script: `setpriv --reuid 1000 --regid 1000 --clear-groups sh -c '
grep CapEff /proc/self/status
setpriv --reuid 0 --regid 0 id -u && echo SETUID-0
su -c "id -u" root </dev/null && echo SU-ROOT
unshare -U true && echo USERNS
id -u'
unshare -U true && echo ROOT-USERNS
cat /proc/sys/user/max_user_namespaces`})
	if strings.Contains(r.Stdout, "SETUID-0") || strings.Contains(r.Stdout, "SU-ROOT") || strings.Contains(r.Stdout, "USERNS") {
		t.Errorf("uid 1000 became root, or a user namespace was made: %+v", r)
	}
	if !strings.Contains(r.Stdout, "CapEff:\t0000000000000000\n") || !strings.HasSuffix(r.Stdout, "1000\n0\n") {
		t.Errorf("uid 1000 holds capabilities, or the namespace allows user namespaces: %+v", r)
	}
}

// Close kills every process of the sandbox's block: one inside running
// as uid 1000, and one outside its namespaces (as a process that left
// them would be) with a uid of the block and no marker in its
// environment.
func TestBwrapCloseKillsEveryUserOfTheBlock(t *testing.T) {
	t.Parallel()
	sb := ranged(t)
	sh, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := blockOf(t, sb, sh, "3300")
	if r, err := sh.Run(context.Background(), "setpriv --reuid 1000 --regid 1000 --clear-groups setsid sleep 302 &", sandbox.RunOptions{}); err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	var inside int
	for pid := range sandboxProcs(t, sb, "sleep\x00302", 1) {
		inside = pid
	}
	outside := exec.Command("sleep", "303")
	outside.Env = []string{}
	outside.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(base + 2000), Gid: uint32(base + 2000), Groups: []uint32{}}}
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- outside.Wait() }()
	defer outside.Process.Kill()
	if got := sandbox.FindBlockProcesses(sb.Info().ID, base); len(got) < 3 {
		t.Errorf("the block's processes: %v, want the shell's, uid 1000's and the one outside", got)
	}
	sb.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("a process of the block outside the sandbox survived Close")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(inside)); err == nil {
		if uid, _ := hostIDs(t, inside); uid == base+1000 {
			t.Errorf("uid 1000's process %d survived Close", inside)
		}
	}
}

// Root inside holds capabilities in the sandbox's user namespace only: a
// host process, its own or one of a uid of the sandbox's block, cannot be
// seen or signalled.
func TestBwrapRootCannotReachHostProcesses(t *testing.T) {
	t.Parallel()
	sb := ranged(t)
	sh, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := blockOf(t, sb, sh, "3400")
	var hosts []*exec.Cmd
	for _, cred := range []*syscall.Credential{nil, {Uid: uint32(base + 1000), Gid: uint32(base + 1000), Groups: []uint32{}}} {
		c := exec.Command("sleep", "304")
		c.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { c.Process.Kill(); c.Wait() }()
		hosts = append(hosts, c)
	}
	for _, c := range hosts {
		pid := strconv.Itoa(c.Process.Pid)
		r := run(t, sb, sandbox.Cmd{Script: "ls /proc | grep -x " + pid + " && echo SEEN; kill -9 " + pid + " && echo KILLED; grep CapEff /proc/self/status"})
		if strings.Contains(r.Stdout, "KILLED") || strings.Contains(r.Stdout, "SEEN") {
			t.Errorf("the sandbox saw or signalled host process %s: %+v", pid, r)
		}
		if !strings.Contains(r.Stdout, "CapEff:\t00000000a00405fb\n") {
			t.Errorf("root's capabilities inside: %+v", r)
		}
		if err := c.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("host process %s is gone: %v", pid, err)
		}
	}
}
