package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/t1pipe/t1/infra/hostres"
)

// Bubblewrap runs each sandbox in new user, pid, network, ipc and uts
// namespaces with bwrap(1): the host's /usr, /etc and /var read-only, the
// per-attempt directories writable, loopback-only networking.
type Bubblewrap struct {
	// Path is the bwrap binary; empty means "bwrap" in PATH.
	Path string

	once     sync.Once
	bin      string
	probeErr error
	sysArgs  []string
}

// Name implements Backend.
func (bw *Bubblewrap) Name() string { return "bwrap" }

// Isolates implements Backend.
func (bw *Bubblewrap) Isolates() bool { return true }

// Available reports whether bwrap is installed and can build a sandbox
// here (user namespaces allowed). It runs a probe once and remembers the
// answer.
func (bw *Bubblewrap) Available() error {
	bw.once.Do(func() {
		bw.bin = bw.Path
		if bw.bin == "" {
			bw.bin = "bwrap"
		}
		p, err := exec.LookPath(bw.bin)
		if err != nil {
			bw.probeErr = fmt.Errorf("sandbox: bubblewrap not found (install the bubblewrap package): %w", err)
			return
		}
		bw.bin = p
		bw.sysArgs = systemArgs()
		filter, err := seccompFile()
		if err != nil {
			bw.probeErr = err
			return
		}
		defer filter.Close()
		files := []*os.File{filter}
		args := append(append([]string{"--unshare-all"}, confineArgs...), "--die-with-parent")
		cmd := exec.Command(bw.bin)
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		what := "new namespaces, --disable-userns: bubblewrap 0.8.0 or newer, a seccomp filter"
		if os.Geteuid() == 0 {
			// As root, the probe's sandbox is a real one's: a block of
			// ids in a user namespace of its own.
			what = "a user namespace mapping a block of " + strconv.Itoa(IDBlock) + " host ids, --userns and --assert-userns-disabled: bubblewrap 0.8.0 or newer, a seccomp filter"
			base, release, err := allocBlock()
			if err != nil {
				bw.probeErr = err
				return
			}
			defer release()
			ids := &idNamespaces{bin: bw.bin, base: base}
			defer ids.close()
			ns, err := ids.file(0)
			if err != nil {
				bw.probeErr = fmt.Errorf("sandbox: bubblewrap cannot build a sandbox with its own ids here (%s): %w", what, err)
				return
			}
			files = append(files, ns)
			args = append(rangedArgs(4, 0), "--die-with-parent")
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(base), Gid: uint32(base), Groups: []uint32{}}
		}
		cmd.Args = append(append(append([]string{bw.bin}, args...), bw.sysArgs...), "--", "/bin/true")
		cmd.Env = []string{}
		cmd.ExtraFiles = files
		out, err := cmd.CombinedOutput()
		closeFiles(files[1:])
		if err != nil {
			bw.probeErr = fmt.Errorf("sandbox: bubblewrap cannot build a confined sandbox here (%s): %v: %s", what, err, strings.TrimSpace(string(out)))
		}
	})
	return bw.probeErr
}

// systemArgs binds the host's system directories read-only and recreates
// the merged-/usr symlinks, since bwrap starts from an empty root.
func systemArgs() []string {
	var args []string
	for _, d := range []string{"/usr", "/etc", "/var"} {
		args = append(args, "--ro-bind", d, d)
	}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", t, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	return append(args, "--proc", "/proc", "--dev", "/dev")
}

// Start implements Backend.
func (bw *Bubblewrap) Start(ctx context.Context, spec Spec) (Sandbox, error) {
	if err := bw.Available(); err != nil {
		return nil, err
	}
	if spec.Proxy != nil && os.Geteuid() != 0 {
		return nil, errors.New("sandbox: a sandbox with the registries proxy needs t1 to run as root (the proxy listens in each command's network namespace, which takes setns); run as root, or use network none")
	}
	uid, release := -1, func() {}
	if os.Geteuid() == 0 {
		tmp := spec.TempDir
		if tmp == "" {
			tmp = os.TempDir()
		}
		if err := searchable(tmp); err != nil {
			return nil, err
		}
		var err error
		if uid, release, err = allocBlock(); err != nil {
			return nil, err
		}
	}
	l, err := newBwrapLauncher(bw, uid, spec.Limits.withDefaults())
	if err != nil {
		release()
		return nil, err
	}
	if l.ids != nil {
		// Root's namespace now, so that a host that cannot map the
		// block fails Start, not the sandbox's first command.
		ns, err := l.ids.file(0)
		if err != nil {
			l.close()
			release()
			return nil, err
		}
		ns.Close()
	}
	return start(ctx, l, spec, uid, uid, func() {
		l.close()
		release()
	})
}

// rangedArgs are the namespace and confinement arguments of a command in
// a sandbox with a block of ids: its user namespace (fd nsFD, made by
// idNamespaces, which already refuses user namespaces below it: bwrap
// checks that with --assert-userns-disabled) instead of one bwrap would
// make, the other namespaces, the seccomp filter (fd 3), and the user,
// whose group is root's, 0, as with docker run --user 1000. Root keeps
// sandboxCaps inside; another user gets none.
func rangedArgs(nsFD, user int) []string {
	args := []string{"--userns", strconv.Itoa(nsFD), "--assert-userns-disabled", "--seccomp", "3",
		"--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
		"--uid", strconv.Itoa(user), "--gid", "0", "--cap-drop", "ALL"}
	if user == 0 {
		for _, c := range sandboxCaps {
			args = append(args, "--cap-add", c)
		}
	}
	return args
}

// searchable checks that every directory from / down to dir lets others
// through (o+x): bwrap runs as the sandbox's own uid and must reach the
// per-attempt directories it binds. dir itself must not be writable by
// others unless sticky: they could move the per-attempt directories.
func searchable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("sandbox: temporary directory: %w", err)
		}
		if d == abs && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("sandbox: temporary directory %s (mode %o) is writable by other users and not sticky: they could move the per-attempt directories; use a directory only root can write, or a sticky one such as /tmp", abs, fi.Mode().Perm())
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("sandbox: temporary directory %s: %s (mode %o) does not let other users through; bwrap runs each sandbox as its own uid, so every parent of Spec.TempDir must be o+x", abs, d, fi.Mode().Perm())
		}
		if d == "/" {
			return nil
		}
	}
}

// shmSize bounds /dev/shm, which is memory, not disk, and outside the
// snapshot: enough for POSIX shared memory and semaphores.
const shmSize = 64 << 20

type bwrapLauncher struct {
	bw  *Bubblewrap
	uid int
	// ids are the sandbox's user namespaces when it has a block of host
	// ids (uid is the block's first); nil when t1 is not root, and every
	// command's bwrap makes a namespace of one id.
	ids *idNamespaces
	confinement
}

func (l *bwrapLauncher) name() string { return "bwrap" }

func (l *bwrapLauncher) isolated() (bool, string) {
	users := "one user, root (uid 0) without capabilities, the host uid t1 runs as: t1 does not run as root, and only root can map more ids"
	switch {
	case l.ids == nil && l.uid >= 0:
		users = fmt.Sprintf("one user, root (uid 0) without capabilities, host uid %d: without a cgroup nothing would bound the tasks of a sandbox of many users (RLIMIT_NPROC counts each uid apart)", l.uid)
	case l.ids != nil:
		users = fmt.Sprintf("users: ids 0-%d inside are host ids %d-%d, the sandbox's own; root keeps Docker's default capabilities less mknod and raw sockets, inside only", IDBlock-1, l.uid, l.uid+IDBlock-1)
	}
	return true, "bubblewrap: new user, pid, network, ipc and uts namespaces; host system directories read-only; loopback-only network; " + users + "; " + l.about()
}

func (l *bwrapLauncher) enforcesNproc() bool { return l.uid > 0 || os.Geteuid() != 0 }

func (l *bwrapLauncher) visible(_ *box, p string) string { return p }

func (l *bwrapLauncher) command(b *box, argv, env []string, dir, user string, standIns map[string]string) (*exec.Cmd, error) {
	uid := "0"
	switch user {
	case "", "root":
	default:
		n, err := strconv.ParseUint(user, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("sandbox: user %q: want root or a numeric uid", user)
		}
		if l.ids != nil && n >= IDBlock {
			return nil, fmt.Errorf("sandbox: user %q: the sandbox's ids are 0-%d", user, IDBlock-1)
		}
		uid = user
	}
	host, ns := l.uid, (*os.File)(nil)
	if l.ids != nil {
		u, _ := strconv.Atoi(uid)
		var err error
		if ns, err = l.ids.file(u); err != nil {
			return nil, err
		}
		host += u
	}
	filter, err := seccompFile()
	if err != nil {
		closeFiles([]*os.File{ns})
		return nil, err
	}
	args := append([]string{"--unshare-all"}, confineArgs...)
	if l.ids != nil {
		// rangedArgs instead, at the end, where the descriptor of the
		// sandbox's user namespace joins the command's files.
		args = []string{}
	}
	args = append(args, "--die-with-parent", "--new-session", "--hostname", "sandbox")
	if b.image == nil {
		args = append(args, l.bw.sysArgs...)
	}
	// The filter is fd 3 (confineArgs); the directories follow it, then
	// the proxy's pipes.
	binds, files, err := b.bindArgs([]*os.File{filter})
	if err != nil {
		closeFiles([]*os.File{filter, ns})
		return nil, err
	}
	args = append(args, binds...)
	standArgs, files, err := b.standInArgs(files, standIns)
	if err != nil {
		closeFiles(append(files, ns))
		return nil, err
	}
	args = append(args, standArgs...)
	netArgs, files, hook, err := b.netArgs(files)
	if err != nil {
		closeFiles(append(files, ns))
		return nil, err
	}
	args = append(args, netArgs...)
	// The root and /dev are bwrap's tmpfs mounts, in memory: read-only, so
	// that everything a command writes lands in a directory the snapshot
	// and the disk budget cover; /dev/shm is a small tmpfs of its own.
	args = append(args, "--perms", "1777", "--size", strconv.Itoa(shmSize), "--tmpfs", "/dev/shm", "--remount-ro", "/dev")
	if b.image == nil || b.image.copied() {
		// An image's overlay root is writable: its upper directory is
		// the attempt's own, under the disk budget. A copy is not, so it
		// stays read-only.
		args = append(args, "--remount-ro", "/")
	}
	if ns != nil {
		args = append(args, rangedArgs(3+len(files), host-l.uid)...)
		files = append(files, ns)
	} else {
		args = append(args, "--uid", uid, "--gid", uid)
	}
	args = append(args, "--chdir", dir, "--")
	args = append(args, argv...)
	cmd := exec.Command(l.bw.bin, args...)
	cmd.Env = env
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	switch {
	case l.ids != nil:
		// The block's first gid, root's inside, lets bwrap through the
		// per-attempt directories (root's, that gid's, 0710) to what it
		// binds. No supplementary group of t1's: the sandbox's processes
		// hold ids of its block only.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(host), Gid: uint32(l.uid), Groups: []uint32{}}
	case l.uid >= 0:
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(l.uid), Gid: uint32(l.uid), NoSetGroups: true}
	}
	if hook != nil {
		b.mu.Lock()
		b.nets[cmd] = hook
		b.mu.Unlock()
	}
	return cmd, nil
}

// ErrUnisolated is what refusing an unisolated backend wraps.
var ErrUnisolated = errors.New("sandbox: commands would run on the host unisolated")

// ByName returns the backend called name: "auto" or "bwrap" (bubblewrap,
// which must work on this machine: auto no longer falls back to anything)
// or "process" (commands on the host as the calling user, no isolation),
// which only allowUnisolated permits. Unisolated execution is a choice,
// never a fallback: an agent's commands are an adversary's.
func ByName(name string, allowUnisolated bool) (Backend, error) {
	// A command about to make sandboxes first removes what killed t1
	// processes left on this host (hostres), before its own add to it.
	if err := hostres.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	switch name {
	case "", "auto", "bwrap", "bubblewrap":
		bw := &Bubblewrap{}
		if err := bw.Available(); err != nil {
			return nil, fmt.Errorf("%w; install bubblewrap (apt-get install bubblewrap, or make setup), or choose unisolated execution explicitly: backend process with allow_unisolated", err)
		}
		return bw, nil
	case "process", "plain":
		if !allowUnisolated {
			return nil, fmt.Errorf("%w: backend %q isolates nothing; allow it explicitly (sandbox.allow_unisolated: true, or --allow-unisolated), or use bwrap", ErrUnisolated, name)
		}
		return &Plain{}, nil
	}
	return nil, fmt.Errorf("sandbox: unknown backend %q (want auto, bwrap or process)", name)
}

var errNoImage = errors.New("sandbox: the plain backend runs on the host's system directories and cannot run on an image; use bwrap, or sandbox.image: host")

var errNoUser = errors.New("sandbox: the plain backend runs every command as the calling user")

var errNoStandIns = errors.New("sandbox: the plain backend runs the host's programs and cannot replace them for one command")
