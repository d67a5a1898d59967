package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A fuse-overlayfs root: where no kernel overlay of idmapped layers can
// be mounted (t1 not root: an overlay mounted in a user namespace shows
// the layers' root-owned files as nobody's and refuses every write to
// them; Linux before 6.8; a layer filesystem without idmapped mounts),
// a fuse-overlayfs daemon of the caller's serves the layers, read-only,
// under an upper directory in fs/.image, at <root>/rootfs. It presents
// every file as the sandbox's host uid's (squash_to_uid: root inside)
// and writes what the sandbox changes into the upper directory as the
// caller, in the overlay's form (whiteouts are 0:0 character devices,
// opaque directories carry user.fuseoverlayfs.opaque), so the disk
// budget, Snapshot and Restore see it as they see the kernel overlay's.
// It reads opaque marks from user.overlay.opaque, which package image
// writes beside trusted.overlay.opaque. A caller that is not root mounts
// through fusermount3 (nosuid, nodev); root mounts itself with
// allow_other, nosuid, nodev, so that the sandbox's uid may enter.

// fuseMagic is FUSE's statfs f_type.
const fuseMagic = 0x65735546

// fuseStartTimeout bounds how long fuse-overlayfs may take to mount.
const fuseStartTimeout = 10 * time.Second

// fuseRoot is a running fuse-overlayfs daemon.
type fuseRoot struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the daemon has exited
	out  bytes.Buffer  // its output, for errors
}

// mountFUSERoot mounts the image's layers with fuse-overlayfs at
// <root>/rootfs, its upper and work directories in fs/.image.
func (b *box) mountFUSERoot(img *Image) error {
	bin, err := exec.LookPath("fuse-overlayfs")
	if err != nil {
		return errors.New("fuse-overlayfs is not installed (apt-get install fuse-overlayfs, or make setup), which a writable image root without the kernel overlay needs")
	}
	// A kernel overlay that failed half-way may have left its directories.
	if err := b.fsRoot.RemoveAll(imageDir); err != nil {
		return err
	}
	if err := b.fsRoot.Mkdir(imageDir, 0o700); err != nil {
		return err
	}
	for _, d := range []string{"upper", "work"} {
		if err := b.fsRoot.Mkdir(imageDir+"/"+d, 0o700); err != nil {
			return err
		}
	}
	var lowers []string
	for i := len(img.Layers) - 1; i >= 0; i-- {
		l, err := filepath.Abs(img.Layers[i])
		if err != nil {
			return err
		}
		lowers = append(lowers, l)
	}
	dir := filepath.Join(b.fsDir, imageDir)
	uid, gid := os.Getuid(), os.Getgid()
	if b.uid >= 0 {
		uid, gid = b.uid, b.gid
	}
	opts := []string{"lowerdir=" + strings.Join(lowers, ":"), "upperdir=" + dir + "/upper", "workdir=" + dir + "/work",
		"squash_to_uid=" + strconv.Itoa(uid), "squash_to_gid=" + strconv.Itoa(gid), "noatime"}
	if os.Geteuid() == 0 {
		opts = append(opts, "allow_other", "nosuid", "nodev")
	}
	for _, p := range append(lowers, dir, b.image.dir) {
		if strings.ContainsAny(p, ":,\\") {
			return fmt.Errorf("fuse-overlayfs: path %s holds ':', ',' or '\\', which its options cannot carry; move the image cache or Spec.TempDir", p)
		}
	}
	f := &fuseRoot{done: make(chan struct{})}
	f.cmd = exec.Command(bin, "-f", "-o", strings.Join(opts, ","), b.image.dir)
	f.cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	f.cmd.Stdout, f.cmd.Stderr = &f.out, &f.out
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := f.cmd.Start(); err != nil {
		return fmt.Errorf("fuse-overlayfs: %w", err)
	}
	go func() { _ = f.cmd.Wait(); close(f.done) }()
	deadline := time.Now().Add(fuseStartTimeout)
	for {
		var st unix.Statfs_t
		if err := unix.Statfs(b.image.dir, &st); err == nil && st.Type == fuseMagic {
			b.image.fuse = f
			return nil
		}
		select {
		case <-f.done:
			return fmt.Errorf("fuse-overlayfs could not mount the image (%s): %s", f.cmd.ProcessState, strings.TrimSpace(f.out.String()))
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			f.stop(b.image.dir)
			return fmt.Errorf("fuse-overlayfs did not mount the image within %s: %s", fuseStartTimeout, strings.TrimSpace(f.out.String()))
		}
	}
}

// stop unmounts the root (lazily: a process still inside keeps its view
// until it exits) and ends the daemon.
func (f *fuseRoot) stop(dir string) {
	if os.Geteuid() == 0 {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			fmt.Fprintf(os.Stderr, "sandbox: unmounting %s: %v\n", dir, err)
		}
	} else if out, err := exec.Command("fusermount3", "-u", "-z", dir).CombinedOutput(); err != nil {
		select {
		case <-f.done: // it was never mounted, or is gone
		default:
			fmt.Fprintf(os.Stderr, "sandbox: unmounting %s: %v: %s\n", dir, err, out)
		}
	}
	select {
	case <-f.done:
		return
	case <-time.After(2 * time.Second):
	}
	_ = f.cmd.Process.Kill()
	<-f.done
}

// pid is the daemon's process id, whose open files the disk budget
// counts too: a file the sandbox deleted while holding it open stays
// open in the daemon, in the upper directory's filesystem.
func (f *fuseRoot) pid() int { return f.cmd.Process.Pid }
