package image

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/t1pipe/t1/infra/sandbox"
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

type copyResult struct {
	Err    string
	Stdout string
	Notes  []string
	Reason string
}

func copyHelper() int {
	r := startOnCopy(strings.Split(os.Getenv(copyHelperEnv), ":"), false)
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

func startOnCopy(layers []string, forced bool) copyResult {
	ctx := context.Background()
	be, err := sandbox.ByName("bwrap", false)
	if err != nil {
		return copyResult{Err: err.Error()}
	}
	sb, err := be.Start(ctx, sandbox.Spec{Image: &sandbox.Image{Layers: layers, WorkDir: "/app", Copy: forced}, Limits: sandbox.Limits{Cgroup: sandbox.CgroupOptional}})
	if err != nil {
		return copyResult{Err: err.Error()}
	}
	defer sb.Close()
	res, err := sb.Exec(ctx, sandbox.Cmd{Script: copyScript})
	if err != nil {
		return copyResult{Err: err.Error()}
	}
	return copyResult{Stdout: res.Stdout, Notes: sb.Info().Notes, Reason: sb.Info().Reason}
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

// TestImageCopyWithoutRoot: run as uid 65534, Start has no overlay of
// idmapped layers to mount and copies the layers instead: the image's
// files with its whiteouts and opaque directories, never the host's,
// read-only. A layer without the marks a non-root copy needs is refused.
func TestImageCopyWithoutRoot(t *testing.T) {
	res := copyImageTask(t)
	// As root, asked for: the same root.
	checkCopy(t, "root, Image.Copy", startOnCopy(res.Image.Layers, true))

	// The cache is root's; a user with an image of its own has layers
	// it can read, as here.
	dir, err := os.MkdirTemp("", "t1-image-copy-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var layers []string
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
	// The test binary, where that user can run it.
	bin := filepath.Join(dir, "image.test")
	if out, err := exec.Command("cp", os.Args[0], bin).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	os.Chmod(dir, 0o755)
	helper := func() copyResult {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = []string{copyHelperEnv + "=" + strings.Join(layers, ":"), "TMPDIR=" + tmp, "HOME=" + tmp, "PATH=" + os.Getenv("PATH")}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}}
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
	r := helper()
	checkCopy(t, "uid 65534", r)
	if !strings.Contains(strings.Join(r.Notes, "\n"), "t1 does not run as root") {
		t.Errorf("notes %q do not say why the root is a copy", r.Notes)
	}
	// Without the marks, an opaque directory cannot be told from another
	// as this user: refused, not copied wrongly.
	if err := unix.Lremovexattr(layers[1], sandbox.MarkedXattr); err != nil {
		t.Fatal(err)
	}
	if r := helper(); !strings.Contains(r.Err, "carries no user-readable opaque marks") {
		t.Errorf("a layer without marks: %+v", r)
	}
}
