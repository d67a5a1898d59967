package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/infra/hostres"
)

// Image is a root filesystem built from a task's Dockerfile (package
// image): the sandbox runs on it instead of the host's /usr, /etc and
// /var.
type Image struct {
	// Layers are host directories in overlayfs upper-directory form
	// (whiteouts are 0:0 character devices, opaque directories carry
	// trusted.overlay.opaque), lowest first. Nothing writes to them.
	Layers []string
	// Env is the image's ENV, "K=V", applied after the base environment.
	Env []string
	// WorkDir is the image's last WORKDIR; empty means /app.
	WorkDir string
	// Notes say how the image was made (the base a FROM was mapped to);
	// Info().Notes carries them.
	Notes []string
	// Copy makes the root a per-attempt copy of the layers, read-only,
	// as Start does where it can mount neither an overlay of idmapped
	// layers nor fuse-overlayfs.
	Copy bool
	// FUSE makes the root a fuse-overlayfs of the layers, as Start does
	// where it cannot mount a kernel overlay of idmapped layers.
	FUSE bool
}

// How an image root is mounted (imageMount.kind).
const (
	rootOverlay = "overlay"        // kernel overlayfs of idmapped layers
	rootFUSE    = "fuse-overlayfs" // fuse-overlayfs daemon, upper directory in fs/.image
	rootCopy    = "copy"           // a read-only per-attempt copy (copyImage)
)

// imageMount is a sandbox's root: the image's layers, idmapped so that
// the files root owns on disk belong to the sandbox's uid, under an
// overlay whose upper directory, on the per-attempt tmpfs, takes every
// write outside the writable directories.
type imageMount struct {
	dir    string   // <root>/rootfs, where the overlay is mounted on the host
	f      *os.File // O_PATH descriptor of the mounted overlay, bound as /
	layers int
	// kind says how the root is mounted (rootOverlay, rootFUSE,
	// rootCopy); why says why it is not the kernel overlay.
	kind  string
	why   string
	fuse  *fuseRoot      // the daemon serving a rootFUSE root
	claim *hostres.Claim // the record of whatever is mounted at dir
}

// copied says the root is a copy of the layers, bound read-only: it lies
// outside the disk budget and the snapshot.
func (m *imageMount) copied() bool { return m.kind == rootCopy }

// imageDir is fs/'s entry holding the overlay's upper and work
// directories: under the disk budget, outside the snapshot, and closed to
// the sandbox's uid (0700 root).
const imageDir = ".image"

// mountImage mounts img as the sandbox's root and copies what the image
// holds in the writable directories into them, so that /app of the image
// is what commands find in /app. The root is, in order of preference, a
// kernel overlay of idmapped layers (t1 root, Linux 6.8+), a
// fuse-overlayfs of the layers (fuseroot.go: where /dev/fuse is usable
// and fuse-overlayfs installed), or a read-only copy of the layers
// (copyImage). Either way it fails closed: never the host's system
// directories instead.
func (b *box) mountImage(ctx context.Context, img *Image) error {
	if len(img.Layers) == 0 {
		return errors.New("sandbox: image without layers")
	}
	top, err := openSafeRoot(b.root)
	if err != nil {
		return err
	}
	defer top.Close()
	if err := top.Mkdir("rootfs", 0o700); err != nil {
		return err
	}
	b.image = &imageMount{dir: filepath.Join(b.root, "rootfs"), layers: len(img.Layers), kind: rootOverlay}
	// Whatever comes to be mounted there (overlay, FUSE) is recorded
	// first; the copy mounts nothing and its record is then a no-op.
	if b.image.claim, err = hostres.RecordMount(b.image.dir, "", "", "sandbox "+b.id+" image root"); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	var why []string
	switch {
	case img.Copy:
		b.image.kind, why = rootCopy, []string{"a copy was asked for"}
	case img.FUSE:
		b.image.kind, why = rootFUSE, []string{"fuse-overlayfs was asked for"}
	case b.uid < 0 || !b.disk.mounted:
		b.image.kind, why = rootFUSE, []string{"t1 does not run as root, which the overlay of idmapped layers needs"}
	default:
		if err := b.mountOverlayRoot(img, top); err != nil {
			b.image.kind, why = rootFUSE, []string{err.Error()}
		}
	}
	if b.image.kind == rootFUSE {
		if err := b.mountFUSERoot(img); err != nil {
			b.image.kind, why = rootCopy, append(why, err.Error())
		}
	}
	b.image.why = strings.Join(why, "; ")
	if b.image.kind == rootCopy {
		dst, err := top.OpenRoot("rootfs")
		if err != nil {
			return err
		}
		err = copyImage(img.Layers, dst, b.uid, b.gid)
		dst.Close()
		if err != nil {
			return err
		}
	}
	if b.image.f, err = top.openat("open", "rootfs", unix.O_PATH|unix.O_DIRECTORY, 0); err != nil {
		return err
	}
	merged, err := top.OpenRoot("rootfs")
	if err != nil {
		return err
	}
	defer merged.Close()
	for _, d := range writableDirs {
		name := strings.TrimPrefix(d, "/")
		fi, err := merged.Lstat(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sandbox: image %s: %w", d, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("sandbox: image: %s is not a directory; the sandbox mounts a writable directory there", d)
		}
		if err := b.copyInto(ctx, merged, name, name); err != nil {
			return err
		}
	}
	b.env = mergeEnv(img.Env, b.env)
	if img.WorkDir != "" && img.WorkDir != "/" {
		b.workDir = img.WorkDir
	}
	b.notes = append(b.notes, img.Notes...)
	switch b.image.kind {
	case rootCopy:
		b.notes = append(b.notes, fmt.Sprintf("root filesystem: a copy of the image's %d layers, read-only (writes outside the writable directories fail), instead of the host's /usr: %s", len(img.Layers), b.image.why))
	case rootFUSE:
		b.notes = append(b.notes, fmt.Sprintf("root filesystem: an image of %d layers, read-only under a per-attempt writable layer served by fuse-overlayfs, instead of the host's /usr: %s", len(img.Layers), b.image.why))
	default:
		b.notes = append(b.notes, fmt.Sprintf("root filesystem: an image of %d layers, read-only under a per-attempt writable layer (kernel overlayfs), instead of the host's /usr", len(img.Layers)))
	}
	return nil
}

// mountOverlayRoot mounts the image's layers, idmapped to the sandbox's
// uid, under an upper directory on the disk-budget tmpfs, at
// <root>/rootfs.
func (b *box) mountOverlayRoot(img *Image, top *safeRoot) error {
	if err := b.fsRoot.Mkdir(imageDir, 0o700); err != nil {
		return err
	}
	for _, d := range []string{"upper", "work"} {
		if err := b.fsRoot.Mkdir(imageDir+"/"+d, 0o700); err != nil {
			return err
		}
	}
	// The upper directory's root is the merged root: the sandbox's, as
	// the image's root-owned / appears through the idmapping.
	if err := b.fsRoot.Lchown(imageDir+"/upper", b.uid, b.gid); err != nil {
		return err
	}
	if err := b.fsRoot.Chmod(imageDir+"/upper", 0o755); err != nil {
		return err
	}
	upper, err := b.fsRoot.openat("open", imageDir+"/upper", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer upper.Close()
	work, err := b.fsRoot.openat("open", imageDir+"/work", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer work.Close()
	ns, err := userNS(b.uid, b.gid, b.ids)
	if err != nil {
		return err
	}
	defer ns.Close()
	return mountOverlay(img.Layers, int(ns.Fd()), upper, work, top, "rootfs")
}

// unmountImage takes the overlay down before the per-attempt directory
// (and the tmpfs holding its upper directory) goes.
func (b *box) unmountImage() {
	if b.image == nil {
		return
	}
	if b.image.f != nil {
		b.image.f.Close()
	}
	switch b.image.kind {
	case rootCopy:
		// removeAll takes the copy with the attempt's directory.
		b.image.claim.Release()
		b.image = nil
		return
	case rootFUSE:
		if b.image.fuse != nil {
			b.image.fuse.stop(b.image.dir)
		}
		b.image.claim.Release()
		b.image = nil
		return
	}
	if err := unix.Unmount(b.image.dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		fmt.Fprintf(os.Stderr, "sandbox: unmounting %s: %v\n", b.image.dir, err)
		return
	}
	b.image.claim.Release()
	b.image = nil
}

// imageRootArgs are bwrap's arguments for the sandbox's root in image mode:
// the overlay by its descriptor (fd n), then a fresh /proc and /dev.
func imageRootArgs(n int) []string {
	return []string{"--bind-fd", strconv.Itoa(n), "/", "--proc", "/proc", "--dev", "/dev"}
}

// userNS returns a user namespace that maps uids 0 … n-1 to the host
// uids from uid on and gids 0 … n-1 to those from gid: an idmapped mount
// with it shows root's files as the sandbox's root's, and those of the
// image's other users (uid 33, 1000) as the same users' of the sandbox's
// block. A short-lived child holds the namespace while it is opened.
func userNS(uid, gid, n int) (*os.File, error) {
	cmd := exec.Command("/bin/sh", "-c", "read _")
	cmd.Env = []string{}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: user namespace: %w", err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: n}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: n}},
		Pdeathsig:   syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: user namespace for the image's idmapping: %w", err)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	in.Close()
	_ = cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("sandbox: user namespace: %w", err)
	}
	return f, nil
}

// mountOverlay mounts, at name beneath at, an overlay of layers (lowest
// first) with upper and work as its writable part. With nsfd ≥ 0 every
// layer is first cloned as a read-only mount idmapped through that user
// namespace. Layers are handed to the kernel by descriptor (lowerdir+),
// upper and work by their /proc/self/fd names, so no path is resolved
// twice.
func mountOverlay(layers []string, nsfd int, upper, work *os.File, at *safeRoot, name string) error {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("sandbox: overlayfs: %w (the image root needs kernel overlayfs)", err)
	}
	defer unix.Close(fsfd)
	fail := func(what string, err error) error {
		return fmt.Errorf("sandbox: overlayfs %s: %w; the image root needs kernel overlayfs with idmapped layers (Linux 6.8 or newer) and a filesystem for the image cache that supports idmapped mounts (ext4, xfs, btrfs, tmpfs)", what, err)
	}
	// The kernel clones each layer privately into the overlay, but only
	// from a mount of this namespace: the idmapped clones are attached
	// under a scratch directory beside name, and detached again once the
	// overlay holds its own.
	scratch := name + ".layers"
	if err := at.Mkdir(scratch, 0o700); err != nil {
		return err
	}
	var attached []string
	defer func() {
		for _, p := range attached {
			_ = unix.Unmount(p, unix.MNT_DETACH)
		}
		_ = at.RemoveAll(scratch)
	}()
	for i := len(layers) - 1; i >= 0; i-- {
		flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
		fd, err := unix.OpenTree(unix.AT_FDCWD, layers[i], flags)
		if err != nil {
			return fail("layer "+layers[i], err)
		}
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if nsfd >= 0 {
			attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
			attr.Userns_fd = uint64(nsfd)
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, attr); err != nil {
			unix.Close(fd)
			return fail("idmapping layer "+layers[i], err)
		}
		slot := scratch + "/" + strconv.Itoa(i)
		if err := at.Mkdir(slot, 0o700); err != nil {
			unix.Close(fd)
			return err
		}
		err = unix.MoveMount(fd, "", at.fd(), slot, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(fd)
		if err != nil {
			return fail("attaching layer "+layers[i], err)
		}
		attached = append(attached, filepath.Join(at.Name(), slot))
		lf, err := at.openat("open", slot, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		err = unix.FsconfigSetFd(fsfd, "lowerdir+", int(lf.Fd()))
		lf.Close()
		if err != nil {
			return fail("lowerdir "+layers[i], err)
		}
	}
	for k, f := range map[string]*os.File{"upperdir": upper, "workdir": work} {
		if err := unix.FsconfigSetString(fsfd, k, fmt.Sprintf("/proc/self/fd/%d", f.Fd())); err != nil {
			return fail(k, err)
		}
	}
	for _, opt := range []string{"index=off", "metacopy=off", "redirect_dir=off", "xino=off"} {
		k, v, _ := strings.Cut(opt, "=")
		if err := unix.FsconfigSetString(fsfd, k, v); err != nil {
			return fail(opt, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return fail("create", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fail("mount", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", at.fd(), name, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fail("attach", err)
	}
	return nil
}

// BuildRoot is an image being built: an overlay of the layers below,
// read-only, and a new layer on top that receives every write of one
// Dockerfile step (package image). It is mounted on the host and needs
// root.
type BuildRoot struct {
	// Proxy, when set, is how RUN reaches the network: a RUN step has
	// a network namespace of its own, with loopback only, and the proxy
	// at 127.0.0.1:3128 (egress.Env set). Nil: no network at all.
	Proxy *egress.Proxy

	dir    string // the merged view
	f      *os.File
	merged *safeRoot
	bwrap  string
	claim  *hostres.Claim // the record of the mount at dir
}

// MountBuild mounts at target (an empty directory) an overlay of lowers
// (lowest first; none for a first layer) under upper, with work as the
// overlay's work directory (empty, on upper's filesystem). The caller
// owns the three directories and must Close the result before it reads
// upper as a layer.
func MountBuild(lowers []string, upper, work, target string) (*BuildRoot, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("sandbox: building an image needs root (overlayfs, and RUN steps that own the image's files, as docker build has them)")
	}
	bin, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, fmt.Errorf("sandbox: bubblewrap not found (install the bubblewrap package): %w", err)
	}
	open := func(d string) (*os.File, error) {
		fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("sandbox: image build: %s: %w", d, err)
		}
		return os.NewFile(uintptr(fd), d), nil
	}
	up, err := open(upper)
	if err != nil {
		return nil, err
	}
	defer up.Close()
	wk, err := open(work)
	if err != nil {
		return nil, err
	}
	defer wk.Close()
	parent, err := openSafeRoot(filepath.Dir(target))
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	if len(lowers) == 0 {
		// An overlay needs a lower layer: an empty one.
		empty, err := os.MkdirTemp(filepath.Dir(work), "empty-")
		if err != nil {
			return nil, err
		}
		defer os.Remove(empty)
		lowers = []string{empty}
	}
	claim, err := hostres.RecordMount(target, "overlay", "", "image build root")
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := mountOverlay(lowers, -1, up, wk, parent, filepath.Base(target)); err != nil {
		claim.Release()
		return nil, err
	}
	r := &BuildRoot{dir: target, bwrap: bin, claim: claim}
	if r.f, err = parent.openat("open", filepath.Base(target), unix.O_PATH|unix.O_DIRECTORY, 0); err != nil {
		r.Close()
		return nil, err
	}
	if r.merged, err = parent.OpenRoot(filepath.Base(target)); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Close unmounts the build overlay.
func (r *BuildRoot) Close() error {
	if r.merged != nil {
		r.merged.Close()
	}
	if r.f != nil {
		r.f.Close()
	}
	if err := unix.Unmount(r.dir, 0); err != nil {
		if err2 := unix.Unmount(r.dir, unix.MNT_DETACH); err2 != nil {
			return fmt.Errorf("sandbox: unmounting %s: %w", r.dir, err)
		}
	}
	r.claim.Release()
	return nil
}

// buildCaps are the capabilities a RUN step keeps: those docker build
// grants by default, less mknod and raw sockets.
var buildCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_SETFCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_AUDIT_WRITE"}

// Run runs argv in the image being built, as docker build runs RUN: as
// root owning the image's files, in new pid, ipc, uts, mount and network
// namespaces with the image as /, under the sandbox's seccomp filter,
// for at most timeout. Its network is r.Proxy's (none without one): the
// allow-list, not the host's network. Output goes to out. It returns the
// exit code (-1 on timeout).
func (r *BuildRoot) Run(ctx context.Context, argv, env []string, dir string, timeout time.Duration, out io.Writer) (int, error) {
	filter, err := seccompFile()
	if err != nil {
		return 0, err
	}
	defer filter.Close()
	args := []string{"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--hostname", "build", "--seccomp", "3",
		"--bind-fd", "4", "/", "--proc", "/proc", "--dev", "/dev"}
	files := []*os.File{filter, r.f}
	var hook *netHook
	if r.Proxy != nil {
		var more []string
		if more, files, hook, err = proxyArgs(files); err != nil {
			return 0, err
		}
		args = append(args, more...)
		env = append(append([]string(nil), env...), egress.Env()...)
	}
	args = append(args, "--cap-drop", "ALL")
	for _, c := range buildCaps {
		args = append(args, "--cap-add", c)
	}
	args = append(args, "--chdir", dir, "--")
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bwrap, append(args, argv...)...)
	cmd.Env = env
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Start()
	if hook != nil {
		// bwrap's ends of the pipes: its own copies now.
		closeFiles(files[2:])
	}
	if err != nil {
		if hook != nil {
			hook.info.Close()
			hook.block.Close()
		}
		return 0, err
	}
	if hook != nil {
		l, aerr := hook.attach(r.Proxy)
		if l != nil {
			defer r.Proxy.Unserve(l)
		}
		if aerr != nil {
			_ = cmd.Cancel()
			_ = cmd.Wait()
			return 0, aerr
		}
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		return -1, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitCode(cmd, err), nil
	}
	return 0, err
}

// Copy applies a COPY or ADD instruction to the image being built from
// the build context contextDir, as the sandbox applies it to its
// writable directories (dockerCopy), but anywhere in the image: files
// keep root as their owner, and no link in the image or the context is
// followed. vars are the ARG and ENV values in force.
func (r *BuildRoot) Copy(ctx context.Context, in Instruction, contextDir, workdir string, vars map[string]string) error {
	src, err := openSafeRoot(contextDir)
	if err != nil {
		return fmt.Errorf("sandbox: build context %s: %w", contextDir, err)
	}
	defer src.Close()
	b := &box{fsRoot: r.merged, uid: -1, gid: -1, anywhere: true, workDir: workdir}
	return b.dockerCopy(ctx, in, src, contextDir, workdir, vars)
}

// CopyFrom applies COPY --from: as Copy, but from the root filesystem
// of src (another stage or image, mounted by MountBuild and not written),
// named ref in errors. Sources are paths of src's root.
func (r *BuildRoot) CopyFrom(ctx context.Context, in Instruction, src *BuildRoot, ref, workdir string, vars map[string]string) error {
	flags := in.Flags[:0:0]
	for _, f := range in.Flags {
		if !strings.HasPrefix(f, "--from=") {
			flags = append(flags, f)
		}
	}
	in.Flags = flags
	b := &box{fsRoot: r.merged, uid: -1, gid: -1, anywhere: true, workDir: workdir}
	return b.dockerCopy(ctx, in, src.merged, "stage "+ref, workdir, vars)
}

// Mkdir creates the directory d of the image and its missing parents
// (WORKDIR).
func (r *BuildRoot) Mkdir(d string) error {
	b := &box{fsRoot: r.merged, uid: -1, gid: -1, anywhere: true}
	rel, err := b.rel(d)
	if err != nil || rel == "." {
		return err
	}
	return b.mkdirAll(rel)
}

// ExpandWord removes one level of shell quoting from a Dockerfile word
// and expands $VAR, ${VAR}, ${VAR:-x} and ${VAR:+x} from vars, as the
// sandbox does for ENV, ARG and WORKDIR.
func ExpandWord(w string, vars map[string]string) (string, error) { return unquote(w, vars) }

// EnvPairs reads an ENV instruction ("K=V K2=V2" or the legacy "K V W")
// into "K=V" pairs, expanding variables from vars.
func EnvPairs(in Instruction, vars map[string]string) ([]string, error) { return envPairs(in, vars) }

// anyRel resolves p against the work directory anywhere below the root.
func anyRel(workDir, p string) string {
	if !path.IsAbs(p) {
		p = path.Join(workDir, p)
	}
	p = strings.TrimPrefix(path.Clean(p), "/")
	if p == "" {
		return "."
	}
	return p
}
