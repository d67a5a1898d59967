package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/internal/hostfeature"
)

// copyHelperEnv makes the test binary a helper that starts one sandbox on
// the layers it names (colon-separated) as whatever user runs it, runs
// copyScript there and prints a copyResult.
const copyHelperEnv = "T1_IMAGE_COPY_HELPER_LAYERS"

// copyScript checks the root a sandbox got: the image's files, its
// whiteout and opaque directory applied, nothing of the host's, a
// read-only root beside writable directories.
const copyScript = `test -e /etc/debian_version && echo debian
test -e /usr/bin/bwrap && echo HOST-BWRAP
test -e /etc/issue && echo WHITEOUT-IGNORED
ls /usr/share/doc
cat /app/data.txt
echo x > /etc/t1-write 2>/dev/null && echo ROOT-WRITABLE
echo y > /app/y && cat /app/y
id -u`

// fuseScript checks a writable root: the image's files (root's on disk,
// root's inside), its whiteout and opaque directory applied, and writes,
// edits and deletions outside the writable directories.
const fuseScript = `test -e /etc/debian_version && echo debian
test -e /usr/bin/bwrap && echo HOST-BWRAP
test -e /etc/issue && echo WHITEOUT-IGNORED
ls /usr/share/doc
cat /app/data.txt
stat -c %u:%g /etc/passwd /usr/bin
mkdir -p /usr/local/bin && printf '#!/bin/sh\necho tool\n' > /usr/local/bin/x && chmod 755 /usr/local/bin/x && x
echo conf > /etc/foo && cat /etc/foo
echo edited >> /etc/debian_version && tail -n 1 /etc/debian_version
rm /usr/share/doc/t1 && ls /usr/share/doc | wc -l
id -u`

type copyResult struct {
	Err    string
	Stdout string
	Stderr string
	Notes  []string
	Reason string
	// Layer holds the snapshot's entries outside the writable
	// directories, with their contents.
	Layer map[string]string
	// RootMount is the root's mount options as the host sees them.
	RootMount string
}

func copyHelper() int {
	mode := os.Getenv(helperModeEnv)
	r := startOn(strings.Split(os.Getenv(copyHelperEnv), ":"), sandbox.Image{}, map[string]string{"copy": copyScript, "fuse": fuseScript}[mode])
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// helperModeEnv says which script the helper runs: copy or fuse.
const helperModeEnv = "T1_IMAGE_COPY_HELPER_MODE"

// startOn starts a sandbox on layers (mode as in img: Copy, FUSE), runs
// script there and snapshots it.
func startOn(layers []string, img sandbox.Image, script string) copyResult {
	ctx := context.Background()
	be, err := sandbox.ByName("bwrap", false)
	if err != nil {
		return copyResult{Err: err.Error()}
	}
	img.Layers, img.WorkDir = layers, "/app"
	sb, err := be.Start(ctx, sandbox.Spec{Image: &img, Limits: sandbox.Limits{Cgroup: sandbox.CgroupOptional}})
	if err != nil {
		return copyResult{Err: err.Error()}
	}
	defer sb.Close()
	var mount string
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, l := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(l); len(f) > 5 && f[4] == filepath.Join(sb.Info().Root, "rootfs") {
				mount = f[5]
			}
		}
	}
	res, err := sb.Exec(ctx, sandbox.Cmd{Script: script})
	if err != nil {
		return copyResult{Err: err.Error()}
	}
	var layer bytes.Buffer
	if err := sb.Snapshot(ctx, &layer); err != nil {
		return copyResult{Err: err.Error()}
	}
	entries := map[string]string{}
	tr := tar.NewReader(&layer)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if !strings.HasPrefix(h.Name, "app/") && !strings.HasPrefix(h.Name, "tmp/") {
			data, _ := io.ReadAll(tr)
			entries[h.Name] = string(data)
		}
	}
	return copyResult{Stdout: res.Stdout, Stderr: res.Stderr, Notes: sb.Info().Notes, Reason: sb.Info().Reason, Layer: entries, RootMount: mount}
}

// copyImageTask builds an image with a whiteout (rm /etc/issue) and an
// opaque directory (/usr/share/doc removed and made again).
func copyImageTask(t testing.TB) *Result {
	cache, base := testBase(t)
	res, err := Build(context.Background(), writeTask(t, `FROM debian:bookworm
RUN rm /etc/issue && rm -rf /usr/share/doc && mkdir /usr/share/doc && touch /usr/share/doc/t1
WORKDIR /app
COPY data.txt ./
`, map[string]string{"data.txt": "from the build context\n"}), Options{CacheDir: cache, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func checkCopy(t *testing.T, who string, r copyResult) {
	t.Helper()
	if r.Err != "" {
		t.Fatalf("%s: %s", who, r.Err)
	}
	if want := "debian\nt1\nfrom the build context\ny\n0\n"; r.Stdout != want {
		t.Errorf("%s: sandbox on a copy printed %q, want %q", who, r.Stdout, want)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "root filesystem: a copy of the image's 4 layers, read-only") || !strings.Contains(r.Reason, "a read-only copy of an image's layers") {
		t.Errorf("%s: notes %q, reason %q", who, r.Notes, r.Reason)
	}
}

func checkFUSE(t *testing.T, who string, r copyResult) {
	t.Helper()
	if r.Err != "" {
		t.Fatalf("%s: %s", who, r.Err)
	}
	if want := "debian\nt1\nfrom the build context\n0:0\n0:0\ntool\nconf\nedited\n0\n0\n"; r.Stdout != want {
		t.Errorf("%s: sandbox on fuse-overlayfs printed %q (stderr %q), want %q", who, r.Stdout, r.Stderr, want)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "writable layer served by fuse-overlayfs") || !strings.Contains(r.Reason, "per-attempt fuse-overlayfs") {
		t.Errorf("%s: notes %q, reason %q", who, r.Notes, r.Reason)
	}
	if opts := "," + r.RootMount + ","; !strings.Contains(opts, ",nosuid,") || !strings.Contains(opts, ",nodev,") {
		t.Errorf("%s: the fuse-overlayfs root is mounted %q, want nosuid and nodev", who, r.RootMount)
	}
	for name, data := range map[string]string{"usr/local/bin/x": "#!/bin/sh\necho tool\n", "etc/foo": "conf\n", "usr/share/doc/.wh.t1": ""} {
		if got, ok := r.Layer[name]; !ok || got != data {
			t.Errorf("%s: snapshot entry %s = %q (present %v), want %q", who, name, got, ok, data)
		}
	}
	if !strings.HasSuffix(r.Layer["etc/debian_version"], "edited\n") {
		t.Errorf("%s: snapshot lacks the edit of /etc/debian_version: %q", who, r.Layer["etc/debian_version"])
	}
	for name := range r.Layer {
		if strings.HasPrefix(name, ".image") || strings.HasSuffix(name, "/.wh..opq") {
			t.Errorf("%s: snapshot holds fuse-overlayfs's own entry %s", who, name)
		}
	}
}

// layerManifest is every file of the layers under dir with its type,
// mode, owner, size, mtime and contents' hash: what no sandbox may
// change.
func layerManifest(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%s %v %d:%d %d %d", p, fi.Mode(), st.Uid, st.Gid, fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// unprivileged sets up what a user other than root needs to run on res's
// image: a readable copy of its layers (the cache is root's; a user with
// an image of its own has layers it can read, as here, every file still
// root's on disk), a temporary directory and the test binary. helper
// runs the test binary there as uid 65534 in a mount namespace of its
// own whose /dev/fuse is dev (a device node the test made), runs script
// mode there and returns its result.
func unprivileged(t *testing.T, res *Result) (layers []string, dir string, helper func(mode, dev string) copyResult) {
	dir, err := os.MkdirTemp("", "t1-image-copy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for i, l := range res.Image.Layers {
		d := filepath.Join(dir, fmt.Sprint(i))
		if out, err := exec.Command("cp", "-a", l, d).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		layers = append(layers, d)
	}
	if out, err := exec.Command("chmod", "-R", "a+rX", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o1777)
	os.Chmod(tmp, 0o1777)
	bin := filepath.Join(dir, "image.test")
	if out, err := exec.Command("cp", os.Args[0], bin).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	os.Chmod(dir, 0o755)
	return layers, dir, func(mode, dev string) copyResult {
		cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" /dev/fuse && exec setpriv --reuid 65534 --regid 65534 --clear-groups "$2" -test.run='^$'`, "sh", dev, bin)
		cmd.Env = []string{copyHelperEnv + "=" + strings.Join(layers, ":"), helperModeEnv + "=" + mode, "TMPDIR=" + tmp, "HOME=" + tmp, "PATH=" + os.Getenv("PATH")}
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper as uid 65534: %v: %s", err, out)
		}
		var r copyResult
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("helper: %v: %s", err, out)
		}
		return r
	}
}

// fuseNode makes a FUSE device node in dir with mode perm: 0600 root's
// as on hosts where only root may mount FUSE, 0666 as Debian has it.
func fuseNode(t *testing.T, dir string, perm uint32) string {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("fuse-%o", perm))
	if err := unix.Mknod(p, unix.S_IFCHR|perm, int(unix.Mkdev(10, 229))); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, fs.FileMode(perm)); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImageCopyWithoutRoot: run as uid 65534 where FUSE is root's only,
// Start can mount neither an overlay of idmapped layers nor
// fuse-overlayfs and copies the layers instead: the image's files with
// its whiteouts and opaque directories, never the host's, read-only. A
// layer without the marks a non-root copy needs is refused.
func TestImageCopyWithoutRoot(t *testing.T) {
	res := copyImageTask(t)
	// As root, asked for: the same root.
	checkCopy(t, "root, Image.Copy", startOn(res.Image.Layers, sandbox.Image{Copy: true}, copyScript))

	layers, dir, helper := unprivileged(t, res)
	dev := fuseNode(t, dir, 0o600)
	r := helper("copy", dev)
	checkCopy(t, "uid 65534", r)
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "t1 does not run as root") || !strings.Contains(notes, "fuse-overlayfs could not mount the image") {
		t.Errorf("notes %q do not say why the root is a copy", r.Notes)
	}
	// Without the marks, an opaque directory cannot be told from another
	// as this user: refused, not copied wrongly.
	if err := unix.Lremovexattr(layers[1], sandbox.MarkedXattr); err != nil {
		t.Fatal(err)
	}
	if r := helper("copy", dev); !strings.Contains(r.Err, "carries no user-readable opaque marks") {
		t.Errorf("a layer without marks: %+v", r)
	}
}

// TestImageFUSEWithoutRoot: run as uid 65534 where /dev/fuse is open to
// every user (Debian's default), Start mounts the layers with
// fuse-overlayfs: the image's root-owned files are root's inside, its
// whiteout and opaque directory apply, a command can install into
// /usr/local/bin, write and edit /etc and delete an image file, the
// snapshot carries all of it, and the layers on disk are unchanged.
func TestImageFUSEWithoutRoot(t *testing.T) {
	if _, err := exec.LookPath("fuse-overlayfs"); err != nil {
		t.Fatal("fuse-overlayfs is not installed: make setup installs it")
	}
	hostfeature.Require(t, hostfeature.FUSE())
	res := copyImageTask(t)
	// As root, asked for.
	before := ""
	for _, l := range res.Image.Layers {
		before += layerManifest(t, l)
	}
	checkFUSE(t, "root, Image.FUSE", startOn(res.Image.Layers, sandbox.Image{FUSE: true}, fuseScript))
	after := ""
	for _, l := range res.Image.Layers {
		after += layerManifest(t, l)
	}
	if before != after {
		t.Errorf("root, Image.FUSE: the sandbox changed the image's layers")
	}

	layers, dir, helper := unprivileged(t, res)
	before = ""
	for _, l := range layers {
		before += layerManifest(t, l)
	}
	r := helper("fuse", fuseNode(t, dir, 0o666))
	checkFUSE(t, "uid 65534", r)
	if !strings.Contains(strings.Join(r.Notes, "\n"), "t1 does not run as root") {
		t.Errorf("notes %q do not say why the root is not the kernel overlay", r.Notes)
	}
	after = ""
	for _, l := range layers {
		after += layerManifest(t, l)
	}
	if before != after {
		t.Errorf("uid 65534: the sandbox changed the image's layers")
	}
}
