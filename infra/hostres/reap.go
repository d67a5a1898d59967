package hostres

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Report says what Reap did.
type Report struct {
	Owners  int      // dead owners whose records were all removed
	Removed int      // resources removed
	Failed  []string // what could not be removed, and why
}

// Reap removes what dead owners of the caller's uid recorded.
func (r *Registry) Reap() (Report, error) {
	var rep Report
	names, err := os.ReadDir(r.dir)
	if errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	for _, n := range names {
		d := filepath.Join(r.dir, n.Name())
		o, err := readOwner(d)
		if err != nil || o.Alive() {
			continue
		}
		if err := r.reapOwner(d, &rep); err != nil {
			if !errors.Is(err, errLeft) {
				rep.Failed = append(rep.Failed, fmt.Sprintf("%s: %v", d, err))
			}
			continue
		}
		rep.Owners++
	}
	if len(rep.Failed) > 0 {
		return rep, fmt.Errorf("hostres: %d left: %s", len(rep.Failed), strings.Join(rep.Failed, "; "))
	}
	return rep, nil
}

// Reap is Default().Reap.
func Reap() (Report, error) { return Default().Reap() }

// readOwner reads an owner directory of the caller's uid; any other is
// not this caller's to reap.
func readOwner(d string) (Owner, error) {
	if err := checkOwnDir(d); err != nil {
		return Owner{}, err
	}
	data, err := readNoFollow(filepath.Join(d, "owner"))
	if err != nil {
		return Owner{}, err
	}
	var o Owner
	if err := json.Unmarshal(data, &o); err != nil {
		return Owner{}, err
	}
	if o.UID != os.Geteuid() || filepath.Base(d) != o.name() {
		return Owner{}, fmt.Errorf("%s: owner file names uid %d, %s", d, o.UID, o.name())
	}
	return o, nil
}

func readNoFollow(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

func readEntries(d string) ([]Entry, error) {
	names, err := os.ReadDir(d)
	if err != nil {
		return nil, err
	}
	var es []Entry
	for _, n := range names {
		if !strings.HasSuffix(n.Name(), ".json") {
			continue
		}
		data, err := readNoFollow(filepath.Join(d, n.Name()))
		if err != nil {
			continue
		}
		var e Entry
		if json.Unmarshal(data, &e) == nil {
			es = append(es, e)
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
	return es, nil
}

// errLeft says that some of an owner's resources stay (Report.Failed
// says which).
var errLeft = errors.New("resources left")

// reapOwner removes what d records, newest first (a mount before the
// directory it is in), then d. It holds d's lock meanwhile; another
// reaper on d makes it return at once.
func (r *Registry) reapOwner(d string, rep *Report) error {
	if rep == nil {
		rep = &Report{}
	}
	lock, err := os.OpenFile(filepath.Join(d, "owner"), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil
	}
	es, err := readEntries(d)
	if err != nil {
		return err
	}
	var failed []string
	for _, e := range slices.Backward(es) {
		if err := remove(e); err != nil {
			failed = append(failed, fmt.Sprintf("%s %s: %v", e.Kind, e.Path, err))
			continue
		}
		rep.Removed++
		_ = os.Remove(filepath.Join(d, fmt.Sprintf("%09d.json", e.Seq)))
	}
	if len(failed) > 0 {
		rep.Failed = append(rep.Failed, failed...)
		return fmt.Errorf("%w: %d of %d", errLeft, len(failed), len(es))
	}
	// What else is in d is the registry's own: the owner file, and
	// records of resources that were never made.
	if err := os.RemoveAll(d); err != nil {
		return err
	}
	return nil
}

// remove removes one recorded resource; one already gone is removed.
func remove(e Entry) error {
	if !filepath.IsAbs(e.Path) || filepath.Clean(e.Path) != e.Path || e.Path == "/" {
		return fmt.Errorf("not a clean absolute path")
	}
	switch e.Kind {
	case Mount:
		return unmount(e)
	case Cgroup:
		return removeCgroup(e.Path)
	case Dir:
		if err := unmountBelow(e.Path); err != nil {
			return err
		}
		return removeBeneath(e.Path, true)
	case File:
		return removeBeneath(e.Path, false)
	}
	return fmt.Errorf("unknown kind %q", e.Kind)
}

// mountPoint is one line of /proc/self/mountinfo.
type mountPoint struct{ dir, fs, source string }

func mounts() ([]mountPoint, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ms []mountPoint
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root dir options [optional…] - fs source super
		f := strings.Fields(sc.Text())
		i := slices.Index(f, "-")
		if len(f) < 5 || i < 0 || i+2 >= len(f) {
			continue
		}
		ms = append(ms, mountPoint{dir: Unescape(f[4]), fs: f[i+1], source: Unescape(f[i+2])})
	}
	return ms, sc.Err()
}

// Unescape undoes /proc/<pid>/mountinfo's octal escapes (\040 for a
// space) in a path field.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmount takes down what is mounted at e.Path, as many times as the
// recorded file system is stacked there, and only that file system.
func unmount(e Entry) error {
	for range 16 {
		ms, err := mounts()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(ms, func(m mountPoint) bool {
			return m.dir == e.Path && (e.FS == "" || m.fs == e.FS) && (e.Source == "" || m.source == e.Source)
		})
		if i < 0 {
			return nil
		}
		if err := detach(ms[i]); err != nil {
			return err
		}
	}
	return fmt.Errorf("still mounted")
}

// unmountBelow takes down every mount at or below dir, deepest first, so
// that removing dir never reaches into a file system mounted in it.
func unmountBelow(dir string) error {
	for range 64 {
		ms, err := mounts()
		if err != nil {
			return err
		}
		var below []mountPoint
		for _, m := range ms {
			if m.dir == dir || strings.HasPrefix(m.dir, dir+"/") {
				below = append(below, m)
			}
		}
		if len(below) == 0 {
			return nil
		}
		sort.Slice(below, func(i, j int) bool { return len(below[i].dir) > len(below[j].dir) })
		if err := detach(below[0]); err != nil {
			return err
		}
	}
	return fmt.Errorf("mounts keep appearing below it")
}

func detach(m mountPoint) error {
	err := unix.Unmount(m.dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EPERM) && strings.HasPrefix(m.fs, "fuse") {
		// A FUSE root of a caller that is not root: fusermount3 is the
		// one way it may unmount, and refuses a path it was not given.
		if out, ferr := exec.Command("fusermount3", "-u", "-z", m.dir).CombinedOutput(); ferr != nil {
			return fmt.Errorf("fusermount3 -u -z %s: %v: %s", m.dir, ferr, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmounting %s: %w", m.dir, err)
	}
	return nil
}

// openParent opens p's directory through openat2 from / with
// RESOLVE_NO_SYMLINKS: no component on the way may be a link.
func openParent(p string) (int, string, error) {
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(unix.AT_FDCWD, filepath.Dir(p), how)
		if (err == unix.EAGAIN || err == unix.EINTR) && tries < 100 {
			continue
		}
		if err == unix.ELOOP {
			return -1, "", fmt.Errorf("%s: a path component is a symbolic link; not followed", filepath.Dir(p))
		}
		return fd, filepath.Base(p), err
	}
}

// removeBeneath removes p (a directory with all it holds, when dir),
// never following a link and never descending into another file system.
func removeBeneath(p string, dir bool) error {
	pfd, base, err := openParent(p)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	// O_PATH descriptors serve *at calls but not reads: reopen for them.
	dfd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if !dir || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		// A file recorded as a directory (or the reverse) is not what was
		// made; a link in its place is removed, not followed.
		if dir && st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return fmt.Errorf("not a directory")
		}
		err := unix.Unlinkat(dfd, base, 0)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	return removeTree(dfd, base, st.Dev)
}

// removeTree removes the directory base in dfd, by descriptor, staying
// on device dev.
func removeTree(dfd int, base string, dev uint64) error {
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.EACCES {
		// A directory made unreadable (chmod 000) inside a sandbox is
		// opened up through a descriptor, so no link is followed.
		if p, perr := unix.Openat(dfd, base, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); perr == nil {
			_ = unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(p), 0o700, 0)
			unix.Close(p)
		}
		fd, err = unix.Openat(dfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), base)
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Dev != dev {
		return fmt.Errorf("%s: another file system is mounted there; not descended into", base)
	}
	for {
		names, rerr := d.Readdirnames(1024)
		for _, n := range names {
			err := unix.Unlinkat(fd, n, 0)
			if err == unix.EISDIR || err == unix.EPERM {
				err = removeTree(fd, n, dev)
			}
			if err != nil && err != unix.ENOENT {
				return fmt.Errorf("%s/%w", base, err)
			}
		}
		if rerr == io.EOF || len(names) == 0 {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	err = unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR)
	if err == unix.ENOENT {
		return nil
	}
	return err
}

// removeCgroup kills what is left in the cgroup at p and removes it,
// only where p lies on a cgroup file system.
func removeCgroup(p string) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(p), &fs); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if fs.Type != unix.CGROUP_SUPER_MAGIC && fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("not on a cgroup file system")
	}
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_ = os.WriteFile(filepath.Join(p, "cgroup.kill"), []byte("1"), 0)
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		data, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		for f := range strings.FieldsSeq(string(data)) {
			if pid, _ := strconv.Atoi(f); pid > 0 && pid != os.Getpid() {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if err = unix.Rmdir(p); err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
	}
	return err
}
