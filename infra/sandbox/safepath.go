package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// safeRoot is a directory the host works in on behalf of a sandbox (the
// per-attempt fs/ directory, ctl/, a task's build context, a download's
// destination). Every name is resolved beneath it by openat2 with
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS: a symbolic link in any
// component, the last included, fails the operation (ELOOP) instead of
// being followed, so whatever links a sandbox, a task or a snapshot layer
// planted, the host never reads, writes, chmods or chowns anything but
// the entry named. (os.Root would follow a link that stays inside the
// directory, and a link from a/b to ".." turns a name under /app into
// the bind source /var/tmp.)
//
// Names in keep can be emptied but never removed, renamed or replaced:
// they are the mount points commands see.
type safeRoot struct {
	f    *os.File // O_PATH directory
	keep map[string]bool
}

// errLink is what a link in a name becomes; it matches syscall.ELOOP.
type errLink struct{}

func (errLink) Error() string {
	return "a path component is a symbolic link (host-side operations never follow links)"
}
func (errLink) Is(target error) bool { return target == syscall.ELOOP }

// openSafeRoot opens dir, itself not a link (its parents are the
// caller's to trust).
func openSafeRoot(dir string) (*safeRoot, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, pathErr("open", dir, err)
	}
	return &safeRoot{f: os.NewFile(uintptr(fd), dir)}, nil
}

// Close releases the directory.
func (r *safeRoot) Close() error { return r.f.Close() }

// Name is the directory's host path as opened.
func (r *safeRoot) Name() string { return r.f.Name() }

func (r *safeRoot) fd() int { return int(r.f.Fd()) }

func pathErr(op, name string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		err = errLink{}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// clean checks a name: relative and inside the root ("." is the root).
func clean(op, name string) (string, error) {
	n := path.Clean(strings.TrimSuffix(name, "/"))
	if name == "" || path.IsAbs(n) || n == ".." || strings.HasPrefix(n, "../") {
		return "", &fs.PathError{Op: op, Path: name, Err: errors.New("not a relative path inside the directory")}
	}
	return n, nil
}

// openat opens name beneath the root without following any link.
func (r *safeRoot) openat(op, name string, flags int, mode uint32) (*os.File, error) {
	n, err := clean(op, name)
	if err != nil {
		return nil, err
	}
	how := &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(r.fd(), n, how)
		if err == nil {
			return os.NewFile(uintptr(fd), path.Base(n)), nil
		}
		// EAGAIN: a rename raced with the lookup; EINTR: a signal.
		if (err == unix.EAGAIN || err == unix.EINTR) && tries < 100 {
			continue
		}
		return nil, pathErr(op, name, err)
	}
}

// parent opens name's directory and returns it with name's last
// component, for the *at calls that act on an entry itself.
func (r *safeRoot) parent(op, name string) (*os.File, string, error) {
	n, err := clean(op, name)
	if err != nil {
		return nil, "", err
	}
	if n == "." {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: errors.New("the directory itself")}
	}
	d, err := r.openat(op, path.Dir(n), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", err
	}
	return d, path.Base(n), nil
}

func (r *safeRoot) kept(op, name string) error {
	if n, err := clean(op, name); err == nil && (n == "." || r.keep[n]) {
		return &fs.PathError{Op: op, Path: name, Err: errors.New("a sandbox mount point: it can be emptied, never removed or replaced")}
	}
	return nil
}

// OpenFile opens name with flag; O_CREAT creates it with perm.
func (r *safeRoot) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return r.openat("open", name, flag, sysMode(perm))
}

// Open opens name for reading.
func (r *safeRoot) Open(name string) (*os.File, error) {
	return r.openat("open", name, os.O_RDONLY, 0)
}

// Create creates or truncates name.
func (r *safeRoot) Create(name string) (*os.File, error) {
	return r.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// OpenRoot opens the directory name as a root of its own.
func (r *safeRoot) OpenRoot(name string) (*safeRoot, error) {
	f, err := r.openat("openroot", name, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	return &safeRoot{f: f}, nil
}

// Stat describes name; a link is an error, never followed.
func (r *safeRoot) Stat(name string) (fs.FileInfo, error) {
	f, err := r.openat("stat", name, unix.O_PATH, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// Lstat describes name itself, a link included.
func (r *safeRoot) Lstat(name string) (fs.FileInfo, error) {
	f, err := r.openat("lstat", name, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// Mkdir creates the directory name.
func (r *safeRoot) Mkdir(name string, perm fs.FileMode) error {
	d, base, err := r.parent("mkdir", name)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Mkdirat(int(d.Fd()), base, sysMode(perm)); err != nil {
		return pathErr("mkdir", name, err)
	}
	return nil
}

// Symlink creates newname as a link to oldname (taken verbatim).
func (r *safeRoot) Symlink(oldname, newname string) error {
	d, base, err := r.parent("symlink", newname)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Symlinkat(oldname, int(d.Fd()), base); err != nil {
		return pathErr("symlink", newname, err)
	}
	return nil
}

// Link creates newname as a hard link to oldname (a link itself, if it
// is one).
func (r *safeRoot) Link(oldname, newname string) error {
	od, obase, err := r.parent("link", oldname)
	if err != nil {
		return err
	}
	defer od.Close()
	nd, nbase, err := r.parent("link", newname)
	if err != nil {
		return err
	}
	defer nd.Close()
	if err := unix.Linkat(int(od.Fd()), obase, int(nd.Fd()), nbase, 0); err != nil {
		return pathErr("link", newname, err)
	}
	return nil
}

// Readlink returns the target of the link name.
func (r *safeRoot) Readlink(name string) (string, error) {
	d, base, err := r.parent("readlink", name)
	if err != nil {
		return "", err
	}
	defer d.Close()
	for n := 256; ; n *= 2 {
		buf := make([]byte, n)
		k, err := unix.Readlinkat(int(d.Fd()), base, buf)
		if err != nil {
			return "", pathErr("readlink", name, err)
		}
		if k < n {
			return string(buf[:k]), nil
		}
	}
}

// Chmod sets name's mode; on a link it fails.
func (r *safeRoot) Chmod(name string, mode fs.FileMode) error {
	f, err := r.openat("chmod", name, unix.O_PATH, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// An O_PATH descriptor takes no fchmod; its /proc entry does, and
	// names exactly the inode already opened.
	if err := unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), sysMode(mode), 0); err != nil {
		return pathErr("chmod", name, err)
	}
	return nil
}

// Lchown sets the owner of name itself.
func (r *safeRoot) Lchown(name string, uid, gid int) error {
	if n, err := clean("lchown", name); err == nil && n == "." {
		if err := unix.Fchownat(r.fd(), "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
			return pathErr("lchown", name, err)
		}
		return nil
	}
	d, base, err := r.parent("lchown", name)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Fchownat(int(d.Fd()), base, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathErr("lchown", name, err)
	}
	return nil
}

// Chown is Lchown: a link is never followed.
func (r *safeRoot) Chown(name string, uid, gid int) error { return r.Lchown(name, uid, gid) }

// Chtimes sets name's access and modification times (a zero time leaves
// that one alone), of a link itself.
func (r *safeRoot) Chtimes(name string, atime, mtime time.Time) error {
	d, base, err := r.parent("chtimes", name)
	if err != nil {
		return err
	}
	defer d.Close()
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	for i, t := range []time.Time{atime, mtime} {
		if !t.IsZero() {
			ts[i] = unix.NsecToTimespec(t.UnixNano())
		}
	}
	if err := unix.UtimesNanoAt(int(d.Fd()), base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathErr("chtimes", name, err)
	}
	return nil
}

// Remove removes the file, link or empty directory name.
func (r *safeRoot) Remove(name string) error {
	if err := r.kept("remove", name); err != nil {
		return err
	}
	d, base, err := r.parent("remove", name)
	if err != nil {
		return err
	}
	defer d.Close()
	err = unix.Unlinkat(int(d.Fd()), base, 0)
	if err == unix.EISDIR {
		err = unix.Unlinkat(int(d.Fd()), base, unix.AT_REMOVEDIR)
	}
	if err != nil {
		return pathErr("remove", name, err)
	}
	return nil
}

// Rename moves oldname to newname.
func (r *safeRoot) Rename(oldname, newname string) error {
	if err := r.kept("rename", oldname); err != nil {
		return err
	}
	if err := r.kept("rename", newname); err != nil {
		return err
	}
	od, obase, err := r.parent("rename", oldname)
	if err != nil {
		return err
	}
	defer od.Close()
	nd, nbase, err := r.parent("rename", newname)
	if err != nil {
		return err
	}
	defer nd.Close()
	if err := unix.Renameat(int(od.Fd()), obase, int(nd.Fd()), nbase); err != nil {
		return pathErr("rename", newname, err)
	}
	return nil
}

// RemoveAll removes name and everything below it; a missing name is not
// an error. Links are removed, never followed.
func (r *safeRoot) RemoveAll(name string) error {
	if err := r.kept("removeall", name); err != nil {
		return err
	}
	d, base, err := r.parent("removeall", name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	if err := removeAt(int(d.Fd()), base); err != nil {
		return pathErr("removeall", name, err)
	}
	return nil
}

// removeAt removes base in the directory dfd, descending into it by
// descriptor when it is a directory.
func removeAt(dfd int, base string) error {
	err := unix.Unlinkat(dfd, base, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return err
	}
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.EACCES {
		// A directory its owner made unreadable (chmod 000) is opened up
		// first, through a descriptor, so no link is followed.
		if p, perr := unix.Openat(dfd, base, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); perr == nil {
			_ = unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(p), 0o700, 0)
			unix.Close(p)
		}
		fd, err = unix.Openat(dfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return err
	}
	dir := os.NewFile(uintptr(fd), base)
	defer dir.Close()
	for {
		names, rerr := dir.Readdirnames(1024)
		for _, n := range names {
			if err := removeAt(fd, n); err != nil {
				return err
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

// ReadFile reads the regular file name, at most max bytes (max < 0: no
// bound). A fifo or device is refused without blocking on it.
func (r *safeRoot) ReadFile(name string, max int64) ([]byte, error) {
	f, err := r.openat("read", name, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("not a regular file (%s)", fi.Mode().Type())}
	}
	var rd io.Reader = f
	if max >= 0 {
		rd = io.LimitReader(f, max+1)
	}
	data, err := io.ReadAll(rd)
	if err != nil {
		return nil, err
	}
	if max >= 0 && int64(len(data)) > max {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("over the %d-byte limit", max)}
	}
	return data, nil
}

// WriteFile creates or truncates name and writes data.
func (r *safeRoot) WriteFile(name string, data []byte, perm fs.FileMode) error {
	f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// FS is the root as a read-only fs.FS (links are errors, not followed).
func (r *safeRoot) FS() fs.FS { return safeFS{r} }

type safeFS struct{ r *safeRoot }

func (s safeFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return s.r.Open(name)
}

// walk calls fn for name and, when it is a directory, everything below
// it in byte order, parents first. Each entry is resolved afresh beneath
// the root, so a link swapped in during the walk fails it, never
// redirects it. fn returning fs.SkipDir skips a directory's contents.
func (r *safeRoot) walk(name string, fn func(name string, info fs.FileInfo) error) error {
	info, err := r.Lstat(name)
	if err != nil {
		return err
	}
	if err := fn(name, info); err != nil || !info.IsDir() {
		if err == fs.SkipDir {
			return nil
		}
		return err
	}
	d, err := r.openat("walk", name, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return pathErr("walk", name, err)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := r.walk(path.Join(name, n), fn); err != nil {
			return err
		}
	}
	return nil
}

// glob matches a slash-separated pattern beneath the root as
// filepath.Glob would, except that a directory on the way that is a link
// is an error rather than something to read. Without magic characters
// the pattern matches itself when it exists.
func (r *safeRoot) glob(pattern string) ([]string, error) {
	p, err := clean("glob", pattern)
	if err != nil {
		return nil, err
	}
	cands := []string{"."}
	parts := strings.Split(p, "/")
	// A candidate that is a link fails the lookup below it (ELOOP): it is
	// an error, never read.
	for _, part := range parts {
		var next []string
		for _, c := range cands {
			if !strings.ContainsAny(part, `*?[\`) {
				n := path.Join(c, part)
				if _, err := r.Lstat(n); err != nil {
					if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
						continue
					}
					return nil, err
				}
				next = append(next, n)
				continue
			}
			if _, err := path.Match(part, ""); err != nil {
				return nil, err
			}
			d, err := r.openat("glob", c, os.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				if errors.Is(err, syscall.ENOTDIR) {
					continue
				}
				return nil, err
			}
			names, err := d.Readdirnames(-1)
			d.Close()
			if err != nil {
				return nil, err
			}
			slices.Sort(names)
			for _, name := range names {
				if ok, _ := path.Match(part, name); ok {
					next = append(next, path.Join(c, name))
				}
			}
		}
		cands = next
	}
	return cands, nil
}

// sysMode converts Go's mode bits to the kernel's.
func sysMode(m fs.FileMode) uint32 {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= unix.S_ISUID
	}
	if m&fs.ModeSetgid != 0 {
		v |= unix.S_ISGID
	}
	if m&fs.ModeSticky != 0 {
		v |= unix.S_ISVTX
	}
	return v
}

// privateDir makes dir (and its parents) and checks that it is a
// directory of the caller's own, closed to everyone else: a directory
// someone else prepared (or a link to one) would let them steer what the
// host creates and removes there.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is not a private directory of uid %d (mode %s): remove it and retry", dir, os.Geteuid(), fi.Mode())
	}
	return nil
}
