package sandbox_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/infra/sandbox/sandboxtest"
	"github.com/t1pipe/t1/internal/hostfeature"
)

// The attacks below each got past the bubblewrap sandbox before it had a
// seccomp filter, --disable-userns and a cgroup.

func confined(t *testing.T, l sandbox.Limits) sandbox.Sandbox {
	t.Helper()
	return sandboxtest.Start(t, requireBwrap(t), sandbox.Spec{Limits: l})
}

func run(t *testing.T, sb sandbox.Sandbox, c sandbox.Cmd) sandbox.Result {
	t.Helper()
	r, err := sb.Exec(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A nested user namespace gives its creator every capability over a new
// mount namespace: a tmpfs mounted there is memory outside the disk
// budget and the snapshot. Mounting in the sandbox's own namespace, or
// in a new mount namespace, is refused too.
func TestBwrapNoNestedNamespacesOrMounts(t *testing.T) {
	t.Parallel()
	sb := confined(t, sandbox.Limits{})
	for _, a := range []struct{ name, user, script string }{
		{"userns as a non-root user", "1000", `unshare -Urm sh -c 'mount -t tmpfs -o size=600m none /tmp && head -c 64M /dev/zero > /tmp/f && echo MOUNTED'`},
		{"userns as root", "", `unshare -Urm sh -c 'mount -t tmpfs none /tmp && echo MOUNTED'`},
		{"mount namespace", "", `unshare -m sh -c 'mount -t tmpfs none /tmp && echo MOUNTED'`},
		{"mount in place", "", `mount -t tmpfs none /tmp && echo MOUNTED`},
		{"new network namespace", "", `unshare -n true && echo MOUNTED`},
	} {
		t.Run(a.name, func(t *testing.T) {
			r := run(t, sb, sandbox.Cmd{Script: a.script, User: a.user})
			if strings.Contains(r.Stdout, "MOUNTED") {
				t.Errorf("the attack worked:\n%s%s", r.Stdout, r.Stderr)
			}
		})
	}
	r := run(t, sb, sandbox.Cmd{Script: "grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status"})
	if !strings.Contains(r.Stdout, "Seccomp:\t2") || !strings.Contains(r.Stdout, "NoNewPrivs:\t1") {
		t.Errorf("commands run without a seccomp filter:\n%s%s", r.Stdout, r.Stderr)
	}
}

// Each syscall is called with arguments that succeed, or fail with
// another errno than the filter's, where it is allowed.
const syscallProbe = `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return r, ctypes.get_errno()
probes = {
    "keyctl": (250, 0, -3, 0),         # KEYCTL_GET_KEYRING_ID of the session keyring
    "add_key": (248, 0, 0, 0, 0, 0),
    "request_key": (249, 0, 0, 0, 0),
    "process_vm_readv": (310, os.getpid(), 0, 0, 0, 0, 0),
    "bpf": (321, 0, 0, 0),             # BPF_MAP_CREATE without attributes
    "perf_event_open": (298, 0, 0, -1, -1, 0),
    "userfaultfd": (323, 1),           # UFFD_USER_MODE_ONLY
    "io_uring_setup": (425, 1, 0),
    "setns": (308, -1, 0),
    "unshare": (272, 0x00020000),      # CLONE_NEWNS
    "mount": (165, 0, 0, 0, 0, 0),
    "open_tree": (428, -100, 0, 0),
    "fsopen": (430, 0, 0),
    "pivot_root": (155, 0, 0),
    "init_module": (175, 0, 0, 0),
    "kexec_load": (246, 0, 0, 0, 0),
    "clone": (56, 0x10000000 | 17, 0, 0, 0, 0),  # CLONE_NEWUSER|SIGCHLD
    "clone3": (435, 0, 0),
}
for name, (nr, *args) in probes.items():
    r, e = call(nr, *args)
    if r == 0 and name == "clone":
        os._exit(0)
    print(name, r, e)
`

func TestBwrapSyscallsRefused(t *testing.T) {
	t.Parallel()
	sb := confined(t, sandbox.Limits{})
	r := run(t, sb, sandbox.Cmd{Args: []string{"python3", "-u", "-c", syscallProbe}})
	got := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(r.Stdout), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 {
			got[f[0]] = f[1] + " errno " + f[2]
		}
	}
	for _, name := range []string{"keyctl", "add_key", "request_key", "process_vm_readv", "bpf",
		"perf_event_open", "userfaultfd", "io_uring_setup", "setns", "unshare", "mount", "open_tree",
		"fsopen", "pivot_root", "init_module", "kexec_load", "clone"} {
		if got[name] != "-1 errno 1" {
			t.Errorf("%s: got %q, want EPERM (-1 errno 1)", name, got[name])
		}
	}
	// clone3's flags are behind a pointer: ENOSYS sends libc to clone.
	if got["clone3"] != "-1 errno 38" {
		t.Errorf("clone3: got %q, want ENOSYS (-1 errno 38)", got["clone3"])
	}
	// Ordinary processes and threads still start.
	r = run(t, sb, sandbox.Cmd{Args: []string{"python3", "-u", "-c", "import threading, subprocess; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join(); subprocess.run(['echo', 'child'])"}})
	if r.Stdout != "thread\nchild\n" {
		t.Errorf("threads or children broken: %+v", r)
	}
}

// ptraceProbe runs each ptrace request it is told to in the sandbox and
// prints "NAME RESULT ERRNO": TRACEME in a child, ATTACH on a child of its
// own (then detached), ATTACH and SEIZE on pid 1 (bwrap's init), ATTACH
// on the pid given as argv[1] (a host process's).
const ptraceProbe = `
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
def pt(req, pid):
    ctypes.set_errno(0)
    return libc.ptrace(req, pid, None, None), ctypes.get_errno()
TRACEME, ATTACH, DETACH, SEIZE = 0, 16, 17, 0x4206
r, w = os.pipe()
kid = os.fork()
if kid == 0:
    os.write(w, b"%d %d" % pt(TRACEME, 0))
    os._exit(0)
os.waitpid(kid, 0)
print("traceme", os.read(r, 64).decode())
kid = os.fork()
if kid == 0:
    time.sleep(30)
    os._exit(0)
res = pt(ATTACH, kid)
if res[0] == 0:
    os.waitpid(kid, 0)
    pt(DETACH, kid)
print("child %d %d" % res)
os.kill(kid, 9)
print("init %d %d" % pt(ATTACH, 1))
print("init-seize %d %d" % pt(SEIZE, 1))
print("host %d %d" % pt(ATTACH, int(sys.argv[1])))
`

// ptrace works as in a Docker container, a binary's own PTRACE_TRACEME
// check and a debugger on the sandbox's own processes included, and
// reaches nothing else: bwrap's init (pid 1, outside the filter) is
// refused, and a host process cannot be named from the sandbox's pid
// namespace (whatever the number names there, the host process has no
// tracer afterwards).
func TestBwrapPtraceConfined(t *testing.T) {
	t.Parallel()
	host := exec.Command("sleep", "60")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { host.Process.Kill(); host.Wait() }()
	sb := confined(t, sandbox.Limits{})
	for _, user := range []string{"", "1000"} {
		r := run(t, sb, sandbox.Cmd{Args: []string{"python3", "-u", "-c", ptraceProbe, strconv.Itoa(host.Process.Pid)}, User: user})
		got := map[string]string{}
		for line := range strings.SplitSeq(strings.TrimSpace(r.Stdout), "\n") {
			if f := strings.Fields(line); len(f) == 3 {
				got[f[0]] = f[1] + " errno " + f[2]
			}
		}
		for name, want := range map[string]string{"traceme": "0 errno 0", "child": "0 errno 0", "init": "-1 errno 1", "init-seize": "-1 errno 1"} {
			if got[name] != want {
				t.Errorf("user %q: ptrace %s: got %q, want %q\n%s%s", user, name, got[name], want, r.Stdout, r.Stderr)
			}
		}
		if !strings.HasPrefix(got["host"], "-1 ") {
			t.Errorf("user %q: ptrace of pid %d (a host process's number): got %q, want a failure", user, host.Process.Pid, got["host"])
		}
		status, err := os.ReadFile("/proc/" + strconv.Itoa(host.Process.Pid) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(status), "TracerPid:\t0\n") {
			t.Errorf("user %q: the host process is traced:\n%s", user, status)
		}
	}
}

// The filter checks x86_64 numbers; the same numbers through the i386
// entry (int 0x80) mean other syscalls, so such a call kills the process
// instead of passing unchecked.
//
// The premise is that the call works outside the sandbox: a kernel without
// IA-32 emulation faults on int 0x80 everywhere (SIGSEGV), and there the
// filter has nothing to refuse.
func TestBwrapForeignSyscallABIRefused(t *testing.T) {
	t.Parallel()
	hostfeature.Require(t, hostfeature.IA32Syscalls())
	sb := confined(t, sandbox.Limits{})
	r := run(t, sb, sandbox.Cmd{Args: []string{"python3", "-c", hostfeature.IA32Probe}})
	if strings.Contains(r.Stdout, "i386 getpid") || r.ExitCode != 128+31 {
		t.Errorf("an i386 syscall was not refused (want SIGSYS, exit 159): %+v", r)
	}
}

// Three processes of 200 MiB each under a 384 MiB limit: each stays
// under its address-space limit, together they are over the sandbox's.
func TestBwrapTotalMemory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("holds memory for seconds to reach a limit: skipped with -short")
	}
	sb := confined(t, sandbox.Limits{Memory: 320 << 20, Disk: 64 << 20})
	r := run(t, sb, sandbox.Cmd{Script: `
for i in 1 2 3; do
  python3 -c 'import time; b = b"x" * (200 << 20); time.sleep(3); print("held")' &
done
wait`})
	if n := strings.Count(r.Stdout, "held"); n == 3 {
		t.Errorf("three processes held 600 MiB under a 384 MiB limit: %+v", r)
	}
	if r := run(t, sb, sandbox.Cmd{Args: []string{"echo", "alive"}}); r.Stdout != "alive\n" {
		t.Errorf("the sandbox did not survive its processes' OOM: %+v", r)
	}
}

// SysV shared memory outlives the process that filled it and is mapped
// only a segment at a time, so no address-space limit sees the total.
func TestBwrapSysVSharedMemory(t *testing.T) {
	t.Parallel()
	sb := confined(t, sandbox.Limits{Memory: 192 << 20, Disk: 64 << 20})
	const shm = `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
seg, held = 64 << 20, 0
for i in range(8):
    id = libc.shmget(0, ctypes.c_size_t(seg), 0o1600)  # IPC_PRIVATE, IPC_CREAT|0600
    p = libc.shmat(id, None, 0)
    ctypes.memset(p, 1, seg)
    libc.shmdt(p)
    held += seg
print("held", held >> 20, "MiB")
`
	r := run(t, sb, sandbox.Cmd{Args: []string{"python3", "-c", shm}})
	if strings.Contains(r.Stdout, "held 512 MiB") {
		t.Errorf("SysV shared memory held 512 MiB under a 256 MiB limit: %+v", r)
	}
}

// Two busy processes for two seconds under a twentieth of a CPU use about
// a tenth of a second of CPU time; unbounded they use up to four (0.67
// on a machine with a load of four per core).
func TestBwrapCPUBandwidth(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("takes two seconds")
	}
	sb := confined(t, sandbox.Limits{CPUs: 0.05})
	r := run(t, sb, sandbox.Cmd{Args: []string{"python3", "-c", `
import os, time
for i in range(2):
    if os.fork() == 0:
        end = time.monotonic() + 2
        while time.monotonic() < end: pass
        os._exit(0)
for i in range(2): os.wait()
t = os.times()
print(t.children_user + t.children_system)
`}})
	used, err := strconv.ParseFloat(strings.TrimSpace(r.Stdout), 64)
	if err != nil {
		t.Fatalf("%+v", r)
	}
	t.Logf("CPU time used: %.2fs", used)
	if used > 0.3 {
		t.Errorf("two busy processes used %.2fs of CPU in 2s under a 0.05-CPU limit", used)
	}
}

// Close kills what is left in the cgroup and removes it.
func TestBwrapCgroupRemovedAtClose(t *testing.T) {
	t.Parallel()
	sb := confined(t, sandbox.Limits{})
	sh, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := sh.Run(context.Background(), "sleep 600 &", sandbox.RunOptions{}); err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	var dirs []string
	deadline := time.Now().Add(5 * time.Second)
	for len(dirs) == 0 && time.Now().Before(deadline) {
		for _, pid := range sandbox.FindProcesses(sb.Info().ID, 0) {
			dirs = append(dirs, cgroupDirs(t, pid)...)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(dirs) == 0 {
		t.Fatal("no sandbox process is in a sandbox cgroup")
	}
	sb.Close()
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s still there after Close (%v)", d, err)
		}
	}
}

// cgroupDirs lists the sandbox cgroups pid is in, as directories.
func cgroupDirs(t *testing.T, pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return nil
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "t1-sandbox-") {
			continue
		}
		for m := range strings.SplitSeq(string(mounts), "\n") {
			pre, post, _ := strings.Cut(m, " - ")
			f := strings.Fields(pre)
			if len(f) < 5 || f[3] != "/" {
				continue
			}
			v2 := strings.HasPrefix(post, "cgroup2 ")
			if (parts[0] == "0" && v2) || (parts[0] != "0" && strings.HasPrefix(post, "cgroup ") && strings.Contains(post, ","+strings.Split(parts[1], ",")[0])) {
				out = append(out, f[4]+parts[2])
			}
		}
	}
	return out
}
