package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/infra/hostres"
)

// writableDirs are the sandbox directories backed by per-attempt host
// directories; everything else is the host's, read-only (bwrap) or simply
// the host's (plain).
var writableDirs = []string{"/app", "/tmp", "/logs", "/tests", "/solution", "/root", "/var/tmp"}

// launcher is what differs between backends: how a command is started and
// which paths it sees.
type launcher interface {
	name() string
	isolated() (bool, string)
	// command returns an unstarted command that runs argv in the sandbox
	// with exactly env, in the sandbox directory dir, as user.
	// standIns are Cmd.StandIns.
	command(b *box, argv, env []string, dir, user string, standIns map[string]string) (*exec.Cmd, error)
	// visible maps a sandbox path to the path commands see.
	visible(b *box, p string) string
	// enforcesNproc says whether RLIMIT_NPROC binds the sandbox's user.
	enforcesNproc() bool
}

// starter is a launcher that starts its commands itself (bwrap: inside
// the sandbox's cgroup).
type starter interface {
	start(c *exec.Cmd) error
}

// box is the Sandbox of both backends.
type box struct {
	l      launcher
	id     string
	root   string // per-attempt host directory
	fsDir  string // root/fs: the writable directories, laid out as in the sandbox
	ctlDir string // root/ctl: shell control files, outside the snapshot
	fsRoot *safeRoot
	uid    int // host owner of sandbox files; -1 keeps the caller's
	gid    int
	// ids is how many host ids from uid (and gid) on are the sandbox's:
	// IDBlock when it has a block of them, else 1 (or 0: uid is -1).
	ids     int
	limits  Limits
	workDir string
	env     []string          // task environment, "K=V", applied after the base
	base    manifest          // state after setup; Snapshot diffs against it
	release func()            // frees the host uid, if one was allocated
	claim   *hostres.Claim    // the record of root (hostres)
	notes   []string          // what the environment build ignored
	aliases map[string]string // command → what it runs (aliases.go)
	disk    diskState         // how the disk budget is enforced, and the last usage seen
	// ctlRoot is ctl/; binds are the writable directories, in
	// writableDirs order, which bwrap binds by descriptor.
	ctlRoot *safeRoot
	binds   []*os.File
	// image is the sandbox's root when it runs on an image (rootfs.go).
	image *imageMount
	// anywhere lets paths name any directory below fsRoot: an image
	// being built, not a sandbox.
	anywhere bool
	// proxy is the sandbox's way out (Spec.Proxy); nets are the
	// per-command hooks that give it to each bwrap command.
	proxy *egress.Proxy
	nets  map[*exec.Cmd]*netHook

	mu     sync.Mutex
	closed bool
	procs  map[*exec.Cmd]struct{}
	shells map[*shell]struct{}
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newBox creates the per-attempt directories. uid/gid own them (-1: the
// caller).
func newBox(l launcher, spec Spec, uid, gid int) (*box, error) {
	b := &box{
		l: l, id: newID(), uid: uid, gid: gid, ids: 1,
		limits:  spec.Limits.withDefaults(),
		workDir: "/app",
		procs:   map[*exec.Cmd]struct{}{},
		shells:  map[*shell]struct{}{},
		proxy:   spec.Proxy,
		nets:    map[*exec.Cmd]*netHook{},
	}
	if bl, ok := l.(*bwrapLauncher); ok && bl.ids != nil {
		b.ids = IDBlock
	}
	tmp := spec.TempDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	// Absolute: bwrap and the plain backend's commands resolve these paths
	// from their own working directory.
	tmp, err := filepath.Abs(tmp)
	if err != nil {
		return nil, fmt.Errorf("sandbox: temporary directory: %w", err)
	}
	// Recorded before it exists: a process killed at any point leaves
	// the next start a record of everything it made (hostres).
	root, claim, err := mkdirRecorded(tmp, "t1-sandbox-"+b.id+"-", "sandbox "+b.id)
	if err != nil {
		return nil, fmt.Errorf("sandbox: per-attempt directory: %w", err)
	}
	b.root, b.claim = root, claim
	b.fsDir = filepath.Join(root, "fs")
	b.ctlDir = filepath.Join(root, "ctl")
	if err := b.makeDirs(); err != nil {
		b.removeAll()
		return nil, fmt.Errorf("sandbox: per-attempt directory: %w", err)
	}
	if spec.WorkDir != "" {
		b.workDir = spec.WorkDir
	}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.env = append(b.env, k+"="+spec.Env[k])
	}
	return b, nil
}

func (b *box) removeAll() {
	b.closeDirs()
	b.unmountImage()
	b.releaseDisk()
	if err := os.RemoveAll(b.root); err != nil {
		slog.Warn("sandbox: removing per-attempt directory", "dir", b.root, "err", err)
		return
	}
	b.claim.Release()
}

// mkdirRecorded makes a directory of a fresh name in dir, 0700, recorded
// (hostres) before it is made.
func mkdirRecorded(dir, prefix, note string) (string, *hostres.Claim, error) {
	for range 100 {
		p := hostres.TempName(dir, prefix)
		c, err := hostres.Record(hostres.Dir, p, note)
		if err != nil {
			return "", nil, err
		}
		err = os.Mkdir(p, 0o700)
		if err == nil {
			return p, c, nil
		}
		c.Release()
		if !errors.Is(err, os.ErrExist) {
			return "", nil, err
		}
	}
	return "", nil, fmt.Errorf("no free name for %s* in %s", prefix, dir)
}

func (b *box) Info() Info {
	iso, why := b.l.isolated()
	if b.image != nil {
		root := map[string]string{
			rootCopy:    "a read-only copy of an image's layers",
			rootFUSE:    "an image's root filesystem (read-only layers under a per-attempt fuse-overlayfs)",
			rootOverlay: "an image's root filesystem (read-only layers under a per-attempt overlay)",
		}[b.image.kind]
		why = strings.Replace(why, "host system directories read-only", root+", not the host's system directories", 1)
	}
	paths := map[string]string{}
	for _, d := range writableDirs {
		paths[d] = filepath.Join(b.fsDir, d)
	}
	if b.proxy != nil {
		why = strings.Replace(why, "loopback-only network", "loopback-only network but for the package registries ("+strings.Join(b.proxy.Hosts(), ", ")+") through t1's proxy", 1)
	}
	info := Info{Backend: b.l.name(), Isolated: iso, Reason: why, ID: b.id, Root: b.root, Paths: paths, Limits: b.limits, Notes: b.notes, Aliases: b.aliases, Disk: b.disk.mode, Proxy: b.proxy}
	if b.image != nil {
		info.ImageLayers = b.image.layers
	}
	return info
}

// rel resolves a sandbox path (absolute, or relative to the work
// directory) to a path relative to fsDir, and checks that it lies in a
// writable directory.
func (b *box) rel(p string) (string, error) {
	if p == "" {
		return "", errors.New("sandbox: empty path")
	}
	if !path.IsAbs(p) {
		p = path.Join(b.workDir, p)
	}
	p = path.Clean(p)
	if b.anywhere {
		return anyRel("/", p), nil
	}
	for _, d := range writableDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return strings.TrimPrefix(p, "/"), nil
		}
	}
	return "", fmt.Errorf("sandbox: %s is not in a writable sandbox directory (%s)", p, strings.Join(writableDirs, ", "))
}

// hostPath is where the host keeps the sandbox path p.
func (b *box) hostPath(p string) (string, error) {
	r, err := b.rel(p)
	if err != nil {
		return "", err
	}
	return filepath.Join(b.fsDir, r), nil
}

// fixedDate is the date of every git commit made in a sandbox.
const fixedDate = "2000-01-01T00:00:00Z"

// baseEnv is the scrubbed environment every command starts from.
func (b *box) baseEnv() []string {
	env := []string{
		"PATH=" + b.aliasPath(),
		"HOME=" + b.l.visible(b, "/root"),
		"TERM=dumb",
		"LANG=C.UTF-8",
		// Commits made in a sandbox get a fixed date, so a rerun with the
		// same seed produces the same commit ids and the same snapshots.
		"GIT_AUTHOR_DATE=" + fixedDate,
		"GIT_COMMITTER_DATE=" + fixedDate,
		"T1_SANDBOX=" + b.id,
	}
	if v := b.l.visible(b, "/tmp"); v != "/tmp" {
		env = append(env, "TMPDIR="+v)
	}
	if b.proxy != nil {
		env = append(env, egress.Env()...)
	}
	return env
}

// mergeEnv returns base overridden by each later list, keeping the first
// position of every key.
func mergeEnv(lists ...[]string) []string {
	var out []string
	idx := map[string]int{}
	for _, l := range lists {
		for _, kv := range l {
			k, _, _ := strings.Cut(kv, "=")
			if i, ok := idx[k]; ok {
				out[i] = kv
				continue
			}
			idx[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

func (b *box) timeout(d time.Duration) time.Duration {
	if d <= 0 || d > b.limits.WallClock {
		return b.limits.WallClock
	}
	return d
}

// dir resolves a command's directory: empty means the work directory, a
// relative one is taken from it.
func (b *box) dir(d string) string {
	if d == "" {
		return b.workDir
	}
	if !path.IsAbs(d) {
		return path.Join(b.workDir, d)
	}
	return path.Clean(d)
}

// wrap prefixes argv with the bash prologue that applies the rlimits.
func (b *box) wrap(argv []string) []string {
	script := b.limits.ulimitScript(b.l.enforcesNproc()) + `; exec "$@"`
	return append([]string{"/bin/bash", "-c", script, "t1-sandbox"}, argv...)
}

// startTracked starts c and records it for Close, atomically with respect
// to Close: a command either starts before Close and is killed by it, or
// does not start.
func (b *box) startTracked(c *exec.Cmd) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		// What the command was handed (the filter, descriptors of the
		// directories) goes with it.
		closeFiles(c.ExtraFiles)
		b.detachNet(c)
		return ErrClosed
	}
	start := c.Start
	if s, ok := b.l.(starter); ok {
		start = func() error { return s.start(c) }
	}
	if err := start(); err != nil {
		b.mu.Unlock()
		b.detachNet(c)
		return fmt.Errorf("sandbox: start %s: %w", c.Path, err)
	}
	b.procs[c] = struct{}{}
	b.mu.Unlock()
	// A command that cannot have its proxy does not run at all: it is
	// still blocked before its own program.
	if err := b.attachNet(c); err != nil {
		killTree(c)
		_ = c.Wait()
		b.untrack(c)
		return err
	}
	return nil
}

func (b *box) untrack(c *exec.Cmd) {
	b.mu.Lock()
	delete(b.procs, c)
	b.mu.Unlock()
	b.detachNet(c)
}

// killTree kills a started command and everything it started: bwrap's
// pid namespace dies with it; the plain backend's process group is killed
// whole.
func killTree(c *exec.Cmd) {
	if c.Process == nil {
		return
	}
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	_ = c.Process.Kill()
}

// Exec implements Sandbox.
func (b *box) Exec(ctx context.Context, c Cmd) (Result, error) {
	argv := c.Args
	switch {
	case len(c.Args) > 0 && c.Script != "":
		return Result{}, errors.New("sandbox: Cmd has both Args and Script")
	case c.Script != "":
		argv = []string{"bash", "-c", c.Script}
	case len(c.Args) == 0:
		return Result{}, errors.New("sandbox: Cmd has neither Args nor Script")
	}
	env := mergeEnv(b.baseEnv(), b.env, c.Env)
	dir := b.dir(c.Dir)
	cmd, err := b.l.command(b, b.wrap(argv), env, dir, c.User, c.StandIns)
	if err != nil {
		return Result{}, err
	}
	cmd.Stdin = c.Stdin
	return b.run(ctx, cmd, c.Timeout, c.MaxOutput, c.StreamStdout, c.StreamStderr)
}

// run starts cmd, collects bounded output, enforces the wall clock and the
// disk budget, and kills whatever the command left behind.
func (b *box) run(ctx context.Context, cmd *exec.Cmd, timeout time.Duration, maxOut int, so, se interface{ Write([]byte) (int, error) }) (Result, error) {
	start := time.Now()
	stdout, stderr := newHeadTail(maxOut, so), newHeadTail(maxOut, se)
	outR, outW, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return Result{}, fmt.Errorf("sandbox: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	// exec.Cmd would copy a Stdin that is not a file in a goroutine that
	// Wait waits for, so a reader that never ends would hold the command
	// open: copy it here instead, and stop feeding when the command ends.
	var stdinSrc io.Reader
	var stdinR, stdinW *os.File
	if cmd.Stdin != nil {
		if _, isFile := cmd.Stdin.(*os.File); !isFile {
			if stdinR, stdinW, err = os.Pipe(); err != nil {
				outR.Close()
				outW.Close()
				errR.Close()
				errW.Close()
				return Result{}, fmt.Errorf("sandbox: %w", err)
			}
			stdinSrc, cmd.Stdin = cmd.Stdin, stdinR
		}
	}
	var closeStdin sync.Once
	stopStdin := func() {
		if stdinW != nil {
			closeStdin.Do(func() { stdinW.Close() })
		}
	}
	defer stopStdin()
	err = b.startTracked(cmd)
	if err == nil {
		hostres.Point("sandbox.exec")
	}
	outW.Close()
	errW.Close()
	if stdinR != nil {
		stdinR.Close()
	}
	if err != nil {
		outR.Close()
		errR.Close()
		return Result{}, err
	}
	defer b.untrack(cmd)
	if stdinSrc != nil {
		// Abandoned when the command ends; it returns once Read does.
		go func() {
			_, _ = io.Copy(stdinW, stdinSrc)
			stopStdin()
		}()
	}
	var copies sync.WaitGroup
	for _, p := range []struct {
		r *os.File
		w *headTail
	}{{outR, stdout}, {errR, stderr}} {
		copies.Go(func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := p.r.Read(buf)
				if n > 0 {
					_, _ = p.w.Write(buf[:n])
				}
				if err != nil {
					return
				}
			}
		})
	}

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	timer := time.NewTimer(b.timeout(timeout))
	defer timer.Stop()
	watch := b.watchDisk()
	defer watch.stop()

	var res Result
	var werr, ctxErr error
	select {
	case werr = <-waited:
	case <-timer.C:
		res.TimedOut = true
		werr = b.stop(cmd, waited)
	case <-watch.exceeded:
		res.DiskExceeded = true
		werr = b.stop(cmd, waited)
	case <-ctx.Done():
		ctxErr = ctx.Err()
		werr = b.stop(cmd, waited)
	}
	stopStdin()
	// Nothing a command starts may outlive it; for bwrap the pid namespace
	// has already gone with its init.
	killTree(cmd)
	// A process that escaped the group may still hold the pipes: stop
	// reading after a grace period.
	deadline := time.Now().Add(500 * time.Millisecond)
	_ = outR.SetReadDeadline(deadline)
	_ = errR.SetReadDeadline(deadline)
	copies.Wait()
	outR.Close()
	errR.Close()

	res.ExitCode = exitCode(cmd, werr)
	if res.TimedOut || res.DiskExceeded || ctxErr != nil {
		res.ExitCode = -1
	}
	if !res.DiskExceeded {
		res.DiskExceeded = watch.final()
	}
	var t1, t2 bool
	res.Stdout, t1 = stdout.result()
	res.Stderr, t2 = stderr.result()
	res.Truncated = t1 || t2
	if res.DiskExceeded {
		res.Stderr += watch.notice()
		if res.ExitCode == 0 {
			res.ExitCode = 1
		}
	} else if watch.over() {
		res.Stderr += stillOver(watch)
	}
	if res.TimedOut {
		res.Stderr += fmt.Sprintf("\n[t1 sandbox: command timed out after %s and was killed]\n", b.timeout(timeout))
	}
	res.Duration = time.Since(start)
	if ctxErr != nil {
		return res, fmt.Errorf("sandbox: command interrupted: %w", ctxErr)
	}
	return res, nil
}

// stop kills a running command and returns once every process it
// started is gone, so that nothing it was writing lands afterwards (the
// disk measurement after the command relies on that). Under bwrap the
// sandbox's init is killed first: it dies only after the kernel has
// killed and reaped the rest of its pid namespace, and the bwrap monitor
// exits after it. Under Plain the process group is killed and awaited.
func (b *box) stop(cmd *exec.Cmd, waited <-chan error) error {
	pid := cmd.Process.Pid
	if b.l.name() == "bwrap" {
		if inner := bwrapInner(pid); inner > 0 {
			_ = syscall.Kill(inner, syscall.SIGKILL)
		}
		select {
		case err := <-waited:
			return err
		case <-time.After(2 * time.Second):
		}
	}
	killTree(cmd)
	err := <-waited
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		if syscall.Kill(-pid, 0) != nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	return err
}

func exitCode(cmd *exec.Cmd, err error) int {
	st := cmd.ProcessState
	if st == nil {
		return -1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// Close implements Sandbox.
func (b *box) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	procs := make([]*exec.Cmd, 0, len(b.procs))
	for c := range b.procs {
		procs = append(procs, c)
	}
	shells := make([]*shell, 0, len(b.shells))
	for s := range b.shells {
		shells = append(shells, s)
	}
	b.mu.Unlock()
	// Kill first (the shells' processes are among procs): a Shell.Run in
	// progress then returns at once, and closing the shell need not wait
	// for its command.
	for _, c := range procs {
		killTree(c)
	}
	for _, s := range shells {
		s.Close()
	}
	// Whatever escaped a process group (setsid, double fork) still carries
	// the sandbox's marker in its environment, or runs as its host uid.
	b.killStragglers()
	if b.proxy != nil {
		// Tunnels still open end here, and are logged.
		b.proxy.Close()
	}
	b.removeAll()
	// Only now, with none of its processes left, may the uid go to
	// another sandbox.
	if b.release != nil {
		b.release()
	}
	return nil
}

// killStragglers kills, until none is left, every process whose
// environment carries this sandbox's marker or that runs as one of the
// sandbox's own host uids.
func (b *box) killStragglers() {
	for range 20 {
		pids := b.findProcesses()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// findProcesses lists live processes that belong to the sandbox.
func (b *box) findProcesses() []int {
	return findProcesses(b.id, b.uid, b.ids)
}

// FindProcesses scans /proc for processes whose environment holds
// T1_SANDBOX=id (an empty id matches none) or, when uid > 0, whose real
// uid is uid. Zombies are skipped: they hold no resources but a pid.
func FindProcesses(id string, uid int) []int { return findProcesses(id, uid, 1) }

// FindBlockProcesses is FindProcesses for a sandbox with a block of ids:
// every process whose real uid is one of base … base+IDBlock-1 is its.
func FindBlockProcesses(id string, base int) []int { return findProcesses(id, base, IDBlock) }

// findProcesses is FindProcesses with the uids uid … uid+n-1.
func findProcesses(id string, uid, n int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	marker := []byte("T1_SANDBOX=" + id + "\x00")
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == self {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		if procState(status) == 'Z' {
			continue
		}
		if u := procUID(status); uid > 0 && u >= uid && u < uid+n {
			pids = append(pids, pid)
			continue
		}
		if id == "" {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && (slices.Equal(env, marker[:len(marker)-1]) || containsEnv(env, marker)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func containsEnv(env, marker []byte) bool {
	s := "\x00" + string(env) + "\x00"
	return strings.Contains(s, "\x00"+string(marker))
}

func procState(status []byte) byte {
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "State:"); ok {
			v = strings.TrimSpace(v)
			if v != "" {
				return v[0]
			}
		}
	}
	return 0
}

func procUID(status []byte) int {
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			var uid int
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d", &uid); err == nil {
				return uid
			}
		}
	}
	return -1
}
