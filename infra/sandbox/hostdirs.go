package sandbox

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// makeDirs lays out the per-attempt directory (see the package
// documentation). Other local users get no way in: the root, fs/, fs/var
// and ctl/ belong to the host's user and are closed to others; when each
// sandbox runs as a host uid of its own, they are root's with that uid's
// group and mode 0710, so bwrap, running as that uid, can reach what it
// binds and nothing there is the sandbox's to change. What the sandbox
// does to its own directories (chmod 777 /app) stays behind that.
func (b *box) makeDirs() error {
	top, err := openSafeRoot(b.root)
	if err != nil {
		return err
	}
	defer top.Close()
	hostMode, hostGid := fs.FileMode(0o700), -1
	if b.uid >= 0 {
		hostMode, hostGid = 0o710, b.gid
	}
	hostDir := func(r *safeRoot, name string) error {
		if name != "." {
			if err := r.Mkdir(name, hostMode); err != nil {
				return err
			}
		}
		if err := r.Lchown(name, -1, hostGid); err != nil {
			return err
		}
		return r.Chmod(name, hostMode)
	}
	for _, d := range []string{".", "fs", "ctl"} {
		if err := hostDir(top, d); err != nil {
			return err
		}
	}
	// The disk budget's filesystem goes over fs/ before anything is in
	// it; its root then takes fs/'s owner and mode.
	if err := b.setupDisk(); err != nil {
		return err
	}
	if b.disk.mounted {
		if err := top.Lchown("fs", -1, hostGid); err != nil {
			return err
		}
		if err := top.Chmod("fs", hostMode); err != nil {
			return err
		}
	}
	if b.fsRoot, err = top.OpenRoot("fs"); err != nil {
		return err
	}
	if b.ctlRoot, err = top.OpenRoot("ctl"); err != nil {
		return err
	}
	if err := hostDir(b.fsRoot, "var"); err != nil {
		return err
	}
	b.fsRoot.keep = map[string]bool{"var": true}
	dirs := append([]string(nil), writableDirs...)
	dirs = append(dirs, "/logs/verifier", "/logs/agent")
	for _, d := range dirs {
		name := strings.TrimPrefix(d, "/")
		mode := fs.FileMode(0o755)
		switch name {
		case "tmp", "var/tmp":
			mode = 0o777 | fs.ModeSticky
		case "root":
			mode = 0o700
		}
		if err := b.fsRoot.Mkdir(name, mode); err != nil {
			return err
		}
		if err := b.chown(name); err != nil {
			return err
		}
		if err := b.fsRoot.Chmod(name, mode); err != nil {
			return err
		}
	}
	for _, d := range writableDirs {
		name := strings.TrimPrefix(d, "/")
		b.fsRoot.keep[name] = true
		f, err := b.fsRoot.openat("open", name, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		b.binds = append(b.binds, f)
	}
	return nil
}

func (b *box) closeDirs() {
	// The slice stays: a command being prepared may read it, and
	// startTracked refuses to start one once the sandbox is closed.
	for _, f := range b.binds {
		f.Close()
	}
	for _, r := range []*safeRoot{b.fsRoot, b.ctlRoot} {
		if r != nil {
			r.Close()
		}
	}
}

// bindArgs binds the writable directories and ctl/ by the descriptors
// opened when they were made, appended to files (a command's ExtraFiles,
// fd 3 onwards): bwrap mounts the directory the descriptor holds, and a
// link put at its path since cannot redirect the mount. Each command gets
// duplicates of its own, which the parent closes once it has started.
func (b *box) bindArgs(files []*os.File) ([]string, []*os.File, error) {
	if len(b.binds) != len(writableDirs) || b.ctlRoot == nil {
		return nil, nil, ErrClosed
	}
	var args []string
	own := len(files)
	if b.image != nil {
		d, err := dupFile(b.image.f)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, imageRootArgs(3+len(files))...)
		files = append(files, d)
	}
	add := func(opt string, f *os.File, dest string) error {
		d, err := dupFile(f)
		if err != nil {
			return err
		}
		args = append(args, opt, strconv.Itoa(3+len(files)), dest)
		files = append(files, d)
		return nil
	}
	for i, d := range writableDirs {
		if err := add("--bind-fd", b.binds[i], d); err != nil {
			closeFiles(files[own:])
			return nil, nil, err
		}
	}
	if err := add("--ro-bind-fd", b.ctlRoot.f, shellCtl); err != nil {
		closeFiles(files[own:])
		return nil, nil, err
	}
	return args, files, nil
}

// dupFile duplicates f's descriptor (close-on-exec; exec.Cmd clears it
// for ExtraFiles); it fails once f is closed (the sandbox was).
func dupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, ErrClosed
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, ErrClosed
	}
	if derr != nil {
		return nil, fmt.Errorf("sandbox: %w", derr)
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

// ctlFile writes the control file ctl/<base of p> for the sandbox user
// to read: created afresh (O_EXCL, no link followed) in a directory the
// sandbox cannot write, and handed to the sandbox's uid through the open
// descriptor.
func (b *box) ctlFile(p string, r io.Reader) error {
	name := path.Base(p)
	if err := b.ctlRoot.Remove(name); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("sandbox: shell: %w", err)
	}
	f, err := b.ctlRoot.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("sandbox: shell: %w", err)
	}
	if b.uid >= 0 {
		if err := f.Chown(b.uid, b.gid); err != nil {
			f.Close()
			return fmt.Errorf("sandbox: shell: %w", err)
		}
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("sandbox: shell: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sandbox: shell: %w", err)
	}
	return nil
}

// ctlRemove removes a control file written by ctlFile.
func (b *box) ctlRemove(p string) {
	_ = b.ctlRoot.Remove(path.Base(p))
}
