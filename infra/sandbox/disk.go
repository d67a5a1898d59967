package sandbox

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/t1pipe/t1/infra/hostres"
)

// diskInterval is how often a running command's disk usage is measured,
// at most: a measurement that takes longer than a tenth of it stretches
// the interval to ten measurements.
const diskInterval = 200 * time.Millisecond

// How the disk budget is enforced (Info.Disk).
const (
	// DiskTmpfs: the writable directories live on a tmpfs of their own,
	// sized to the budget; the kernel refuses what would exceed it.
	DiskTmpfs = "tmpfs"
	// DiskMeasured: they live on the host's filesystem and are measured.
	DiskMeasured = "measured"
)

// maxDepth is how deep the measuring walk descends. A tree deeper than it
// counts as over the budget: its paths are longer than PATH_MAX (a level
// is at least two bytes), so no snapshot could carry it either.
const maxDepth = maxPath / 2

// measureOnly makes root callers measure instead of mounting, so that the
// fallback that unprivileged callers get can be exercised where root runs
// the tests.
var measureOnly bool

// diskState is how a box enforces its disk budget, and what it last saw.
type diskState struct {
	mode    string
	mounted bool
	claim   *hostres.Claim // the tmpfs's record
	dev     uint64         // device of the fs directory (measured mode)
	mu      sync.Mutex
	last    usage
}

// usage is what the writable directories hold.
type usage struct {
	bytes  int64 // allocated bytes: sparse holes are free, hard links count once
	inodes int64 // names: files, directories, links (hard links each), the writable directories themselves included
	// deep says a tree goes deeper than maxDepth (measured mode).
	deep bool
}

func (b *box) overBudget(u usage) bool {
	return u.bytes > b.limits.Disk || u.inodes > b.limits.Inodes || u.deep
}

// setupDisk, for a root caller, mounts a
// tmpfs there of the budget's size (plus one page, so that going past the
// budget is seen) and inode count (plus one). It fails closed: root that
// cannot mount gets an error, not a weaker budget. Other callers cannot
// mount on the host and measure instead.
func (b *box) setupDisk() error {
	if os.Geteuid() != 0 || measureOnly {
		var st unix.Stat_t
		if err := unix.Lstat(b.fsDir, &st); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		b.disk.mode, b.disk.dev = DiskMeasured, st.Dev
		return nil
	}
	page := int64(os.Getpagesize())
	size := (b.limits.Disk+page-1)/page*page + page
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0711", size, b.limits.Inodes+1)
	claim, err := hostres.RecordMount(b.fsDir, "tmpfs", "t1-sandbox-"+b.id, "sandbox "+b.id+" disk budget")
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := unix.Mount("t1-sandbox-"+b.id, b.fsDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		claim.Release()
		return fmt.Errorf("sandbox: mounting the per-attempt tmpfs (%s) on %s: %w; as root the sandbox enforces its disk budget with a tmpfs of its own, which needs CAP_SYS_ADMIN: grant it, or run t1 as an unprivileged user (whose sandboxes measure disk use instead)", opts, b.fsDir, err)
	}
	b.disk.mode, b.disk.mounted, b.disk.claim = DiskTmpfs, true, claim
	return nil
}

// releaseDisk unmounts the tmpfs; lazily, so that a process the kernel
// has not finished reaping cannot keep the directory from being removed.
func (b *box) releaseDisk() {
	if !b.disk.mounted {
		return
	}
	if err := unix.Unmount(b.fsDir, unix.MNT_DETACH); err != nil {
		// Removing the directory would then empty the mounted filesystem,
		// which frees its memory just as well.
		fmt.Fprintf(os.Stderr, "sandbox: unmounting %s: %v\n", b.fsDir, err)
		return
	}
	b.disk.mounted = false
	b.disk.claim.Release()
}

// usage measures the writable directories: the tmpfs's own counters, or
// a walk of the tree plus the files the sandbox's processes hold open
// after deleting them.
func (b *box) usage() usage {
	if b.disk.mode == DiskTmpfs {
		var st unix.Statfs_t
		if err := unix.Statfs(b.fsDir, &st); err != nil {
			// Unmeasurable is over: fail closed.
			return usage{bytes: math.MaxInt64}
		}
		return usage{bytes: int64(st.Blocks-st.Bfree) * st.Bsize, inodes: int64(st.Files - st.Ffree)}
	}
	var u usage
	seen := map[uint64]bool{}
	fd, err := unix.Open(b.fsDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return usage{bytes: math.MaxInt64}
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		u.add(&st, seen)
	}
	walkUsage(fd, 0, &u, seen)
	b.openDeleted(&u, seen)
	return u
}

// add counts one name: every name takes an inode (as on tmpfs, where a
// hard link does too), a file's blocks count once.
func (u *usage) add(st *unix.Stat_t, seen map[uint64]bool) {
	u.inodes++
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if seen[st.Ino] {
			return
		}
		seen[st.Ino] = true
	}
	u.bytes += st.Blocks * 512
}

// walkUsage adds what the directory fd holds and closes it. It works
// from file descriptors (openat, fstatat), so no path grows past PATH_MAX
// and no symbolic link is followed.
func walkUsage(fd, depth int, u *usage, seen map[uint64]bool) {
	dir := os.NewFile(uintptr(fd), "")
	defer dir.Close()
	for {
		names, err := dir.Readdirnames(256)
		for _, n := range names {
			var st unix.Stat_t
			if err := fstatat(fd, n, &st); err != nil {
				continue // vanished while walking
			}
			u.add(&st, seen)
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			if depth+1 >= maxDepth {
				u.deep = true
				continue
			}
			cfd, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			walkUsage(cfd, depth+1, u, seen)
		}
		if err != nil {
			return // io.EOF, or a directory that went away
		}
	}
}

func fstatat(dirfd int, name string, st *unix.Stat_t) error {
	return unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
}

// openDeleted adds the files that the sandbox's processes hold open after
// deleting them: they still take space on the fs directory's filesystem.
func (b *box) openDeleted(u *usage, seen map[uint64]bool) {
	pids := b.findProcesses()
	if b.image != nil && b.image.fuse != nil {
		pids = append(pids, b.image.fuse.pid())
	}
	for _, pid := range pids {
		fds := fmt.Sprintf("/proc/%d/fd", pid)
		ents, err := os.ReadDir(fds)
		if err != nil {
			continue
		}
		for _, e := range ents {
			var st unix.Stat_t
			if unix.Stat(filepath.Join(fds, e.Name()), &st) != nil {
				continue
			}
			if st.Nlink != 0 || st.Dev != b.disk.dev || st.Mode&unix.S_IFMT != unix.S_IFREG || seen[st.Ino] {
				continue
			}
			seen[st.Ino] = true
			u.inodes++
			u.bytes += st.Blocks * 512
		}
	}
}

// diskWatch measures usage while a command runs. A command exceeds the
// budget when it takes usage past the limit and above where it started:
// after an overrun, the command that frees space must be able to run.
type diskWatch struct {
	b        *box
	start    usage // usage when the command started, as last measured
	exceeded chan struct{}
	done     chan struct{}
	once     sync.Once
	stopOnce sync.Once
	mu       sync.Mutex
	used     usage
}

func (b *box) lastUsage() usage {
	b.disk.mu.Lock()
	defer b.disk.mu.Unlock()
	return b.disk.last
}

func (b *box) setUsage(u usage) {
	b.disk.mu.Lock()
	b.disk.last = u
	b.disk.mu.Unlock()
}

func (b *box) watchDisk() *diskWatch {
	start := b.lastUsage()
	if b.overBudget(start) {
		// Over the budget already: measure afresh, so that only this
		// command's own growth counts against it.
		start = b.usage()
		b.setUsage(start)
	}
	w := &diskWatch{b: b, start: start, exceeded: make(chan struct{}), done: make(chan struct{})}
	go func() {
		// A large tree makes each walk expensive: keep the walks under a
		// tenth of the time.
		wait := diskInterval
		for {
			t := time.NewTimer(wait)
			select {
			case <-w.done:
				t.Stop()
				return
			case <-t.C:
			}
			start := time.Now()
			if w.check() {
				return
			}
			wait = max(diskInterval, 10*time.Since(start))
		}
	}()
	return w
}

// check measures once and reports whether the budget is exceeded.
func (w *diskWatch) check() bool {
	u := w.b.usage()
	w.b.setUsage(u)
	w.mu.Lock()
	w.used = u
	w.mu.Unlock()
	l := w.b.limits
	if (u.bytes > l.Disk && u.bytes > w.start.bytes) || (u.inodes > l.Inodes && u.inodes > w.start.inodes) || (u.deep && !w.start.deep) {
		w.once.Do(func() { close(w.exceeded) })
		return true
	}
	return false
}

func (w *diskWatch) stop() { w.stopOnce.Do(func() { close(w.done) }) }

// final stops the watch and measures once more, after the command.
func (w *diskWatch) final() bool {
	w.stop()
	return w.check()
}

// over says whether the last measurement was over the budget, whoever
// caused it.
func (w *diskWatch) over() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.overBudget(w.used)
}

// state says what the last measurement found over the budget.
func (w *diskWatch) state() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	u, l := w.used, w.b.limits
	var parts []string
	if u.bytes > l.Disk {
		parts = append(parts, fmt.Sprintf("the writable directories use %s, the limit is %s", FormatSize(u.bytes), FormatSize(l.Disk)))
	}
	if u.inodes > l.Inodes {
		parts = append(parts, fmt.Sprintf("they hold %d files and directories, the limit is %d", u.inodes, l.Inodes))
	}
	if u.deep {
		parts = append(parts, fmt.Sprintf("a directory tree is deeper than %d levels", maxDepth))
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("the writable directories use %s, the limit is %s", FormatSize(u.bytes), FormatSize(l.Disk)))
	}
	return strings.Join(parts, "; ")
}

func (w *diskWatch) notice() string {
	return "\n[t1 sandbox: disk limit exceeded: " + w.state() + "]\n"
}

// stillOver is the notice for a command that ran while the directories
// were already over the budget, without adding to it.
func stillOver(w *diskWatch) string {
	return "\n[t1 sandbox: the writable directories are still over the disk limit: " + w.state() + "; free space]\n"
}
