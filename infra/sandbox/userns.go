package sandbox

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// IDBlock is how many user and group ids a sandbox has when t1 runs as
// root: ids 0 … IDBlock-1 inside are the host ids base … base+IDBlock-1
// of the sandbox's own block, as in a Docker container with user
// namespace remapping.
const IDBlock = 1 << 16

// Blocks are drawn from 2^30+2^24 … 2^31, above the single uids that
// earlier releases drew (2^30 … 2^30+2^24), so a sandbox of an older t1
// running beside this one never shares an id with it.
const (
	blockBase  = 1<<30 + 1<<24
	blockCount = (1<<31 - blockBase) / IDBlock
)

// blockLocks holds one lock file per block. It is the host's, not
// $TMPDIR's: host ids are shared by every process on the host, and two
// t1 processes with different temporary directories (a batch job's own
// TMPDIR) would otherwise draw the same block, and one sandbox's Close,
// which kills every process of its block, would kill the other's.
const blockLocks = "/run/t1/sandbox-uids"

// allocBlock picks a block of IDBlock host ids for one sandbox. Blocks
// are drawn at random and held by an flock on a lock file named after
// the block's first id, for as long as the sandbox lives; release frees
// it.
func allocBlock() (base int, release func(), err error) {
	return allocBlockIn(blockLocks, blockCount, blockHasProcesses)
}

// allocBlockIn draws from count blocks with locks in dir, skipping a
// block whose lock is free but that busy says still has processes: those
// of a sandbox whose t1 was killed (its lock went with it) live until
// the next t1 reaps that sandbox's cgroup, and must not share ids with
// a new sandbox.
//
// Lock files are never removed. Removing one on release would let a
// process that opened it just before lock the unlinked file while a
// third creates and locks a new one under the same name: two holders of
// one block.
func allocBlockIn(dir string, count int, busy func(base int) bool) (base int, release func(), err error) {
	if err := privateDir(dir); err != nil {
		return 0, nil, fmt.Errorf("sandbox: uid locks: %w", err)
	}
	for range 100 {
		var b [4]byte
		_, _ = rand.Read(b[:])
		base := blockBase + int(binary.LittleEndian.Uint32(b[:])%uint32(count))*IDBlock
		p := filepath.Join(dir, "block-"+strconv.Itoa(base))
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return 0, nil, fmt.Errorf("sandbox: uid lock: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		if busy(base) {
			f.Close()
			continue
		}
		return base, func() { f.Close() }, nil
	}
	return 0, nil, errors.New("sandbox: no free block of sandbox uids after 100 draws")
}

// blockHasProcesses reports whether a live process runs as one of the
// host ids of the block at base.
func blockHasProcesses(base int) bool {
	return len(FindBlockProcesses("", base)) > 0
}

// sandboxCaps are what root inside a sandbox keeps, in its own user
// namespace only: Docker's default set less CAP_MKNOD and CAP_NET_RAW,
// as for a build's RUN. Enough for useradd, chown, su and runuser; none
// of them reaches a file or process whose owner lies outside the block.
// CAP_SYS_RESOURCE is not among them: with it root could raise the user
// namespace's user.max_user_namespaces again.
var sandboxCaps = buildCaps

// idNamespaces are a sandbox's user namespaces: each maps ids 0 …
// IDBlock-1 to the sandbox's block and allows no user namespace below
// it. bwrap joins one (--userns) as the host uid that owns it, which
// gives it the capabilities to build the sandbox there: base for root's
// commands, base+u for those of user u, whose bwrap then switches to u
// without losing them. One per user, made on first use.
type idNamespaces struct {
	bin  string
	base int

	mu sync.Mutex
	ns map[int]*os.File
}

// file returns a descriptor of user's namespace for one bwrap command
// (its own copy: a command's files are closed once it has started).
func (n *idNamespaces) file(user int) (*os.File, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f, ok := n.ns[user]
	if !ok {
		var err error
		if f, err = makeUserNS(n.bin, n.base+user, n.base); err != nil {
			return nil, err
		}
		if n.ns == nil {
			n.ns = map[int]*os.File{}
		}
		n.ns[user] = f
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: user namespace: %w", err)
	}
	return os.NewFile(uintptr(fd), "userns"), nil
}

func (n *idNamespaces) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, f := range n.ns {
		f.Close()
	}
	n.ns = nil
}

// nsSetupTimeout bounds making one user namespace (a bwrap that sets a
// sysctl and exits).
const nsSetupTimeout = 30 * time.Second

// makeUserNS makes a user namespace owned by the host uid owner in which
// ids 0 … IDBlock-1 are base … base+IDBlock-1, and in which no further
// user namespace can be made, and returns a descriptor that keeps it.
//
// bwrap, running as owner, creates it and waits (--userns-block-fd)
// while this process, root in the host's namespace, writes the ranges
// into its uid_map and gid_map, which only a writer with CAP_SETUID and
// CAP_SETGID above the namespace may do for more than one id. bwrap
// then runs, as root of the namespace with CAP_SYS_RESOURCE alone, a
// shell that sets the namespace's user.max_user_namespaces to 0. No
// process of a sandbox ever holds CAP_SYS_RESOURCE there (sandboxCaps),
// so none can raise it again, and the kernel refuses every user
// namespace below this one: what bwrap's --disable-userns does with a
// second, nested namespace, which would map one id only.
func makeUserNS(bin string, owner, base int) (*os.File, error) {
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: user namespace: %w", err)
	}
	defer infoR.Close()
	blockR, blockW, err := os.Pipe()
	if err != nil {
		infoW.Close()
		return nil, fmt.Errorf("sandbox: user namespace: %w", err)
	}
	defer blockW.Close()
	args := []string{"--unshare-user", "--userns-block-fd", "3", "--info-fd", "4", "--uid", "0", "--gid", "0",
		"--cap-drop", "ALL", "--cap-add", "CAP_SYS_RESOURCE", "--die-with-parent"}
	// The host's procfs in place of a fresh one, whose /proc/sys bwrap
	// makes read-only: the sysctl written through it is the writer's user
	// namespace's, this one's.
	for _, a := range systemArgs() {
		if a == "--proc" {
			break
		}
		args = append(args, a)
	}
	args = append(args, "--bind", "/proc", "/proc", "--", "/bin/sh", "-c", "echo 0 > /proc/sys/user/max_user_namespaces")
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.ExtraFiles = []*os.File{blockR, infoW}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(owner), Gid: uint32(owner), Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	err = cmd.Start()
	blockR.Close()
	infoW.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox: user namespace: starting bwrap: %w", err)
	}
	timer := time.AfterFunc(nsSetupTimeout, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	fail := func(err error) (*os.File, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("sandbox: user namespace for the sandbox's %d ids: %w: %s", IDBlock, err, strings.TrimSpace(out.String()))
	}
	var info struct {
		Pid int `json:"child-pid"`
	}
	data, err := io.ReadAll(io.LimitReader(infoR, 4096))
	if err != nil {
		return fail(err)
	}
	if err := json.Unmarshal(data, &info); err != nil || info.Pid <= 0 {
		return fail(fmt.Errorf("bwrap's --info-fd said %q", data))
	}
	// The pid is bwrap's child, which waits for the maps: it cannot be
	// another process's unless it died, and then it is not bwrap's child.
	if ppid, err := parentPid(info.Pid); err != nil || ppid != cmd.Process.Pid {
		return fail(fmt.Errorf("process %d is not bwrap's child (parent %d, %v)", info.Pid, ppid, err))
	}
	proc := "/proc/" + strconv.Itoa(info.Pid)
	ns, err := os.Open(proc + "/ns/user")
	if err != nil {
		return fail(err)
	}
	var self, st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &self); err != nil || unix.Fstat(int(ns.Fd()), &st) != nil || st.Ino == self.Ino {
		ns.Close()
		return fail(errors.New("bwrap's child is not in a user namespace of its own"))
	}
	m := fmt.Sprintf("0 %d %d\n", base, IDBlock)
	for _, f := range []string{"uid_map", "gid_map"} {
		if err := os.WriteFile(proc+"/"+f, []byte(m), 0); err != nil {
			ns.Close()
			return fail(fmt.Errorf("writing %s (root in the host's user namespace maps the sandbox's ids): %w", f, err))
		}
	}
	if _, err := blockW.Write([]byte{1}); err != nil {
		ns.Close()
		return fail(err)
	}
	if err := cmd.Wait(); err != nil {
		ns.Close()
		return nil, fmt.Errorf("sandbox: user namespace for the sandbox's %d ids: setting user.max_user_namespaces to 0 in it: %w: %s", IDBlock, err, strings.TrimSpace(out.String()))
	}
	return ns, nil
}

// parentPid reads a process's parent from /proc.
func parentPid(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no PPid")
}
