package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/infra/sandbox/sandboxtest"
)

// The attacks below come from an adversarial probe of the bubblewrap
// backend: each writes out what a task file, a snapshot layer or a
// command inside the sandbox does to reach the host, and checks that the
// host stays out of reach.

func token(t *testing.T) string {
	t.Helper()
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "t1-canary-" + hex.EncodeToString(b[:])
}

// hostCanary is a host directory, outside every sandbox, that any user
// may traverse and write, holding a world-readable file with a token:
// what a sandbox that reached the host's root would read and write.
func hostCanary(t *testing.T) (dir, tok string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "t1-host-canary-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tok = token(t)
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte(tok), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir, tok
}

// deepUp is a relative link target of n ".." components.
func deepUp(n int) string { return strings.TrimSuffix(strings.Repeat("../", n), "/") }

// depth counts the components of an absolute path.
func depth(p string) int { return len(strings.Split(strings.Trim(filepath.Clean(p), "/"), "/")) }

// probeHost runs, in the sandbox, what an attacker with the host's root
// bound at /var/tmp would, and fails when the host was reached.
func probeHost(t *testing.T, sb sandbox.Sandbox, canary, tok string) {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.Cmd{Script: "cat /var/tmp" + canary + "/secret; echo pwned > /var/tmp" + canary + "/written; ls /var/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout, tok) {
		t.Errorf("the sandbox read a host file through /var/tmp: %q", res.Stdout)
	}
	if _, err := os.Stat(filepath.Join(canary, "written")); err == nil {
		t.Errorf("the sandbox wrote %s/written on the host", canary)
	}
	for _, host := range []string{"usr", "proc", "etc"} {
		if strings.Contains("\n"+res.Stdout, "\n"+host+"\n") {
			t.Errorf("/var/tmp shows the host's root (%s):\n%s", host, res.Stdout)
			break
		}
	}
}

// TestBindSourceSwappedForLink: a task's COPY, or a snapshot layer,
// replaces a per-attempt bind source (fs/var/tmp) with a link to the
// host's root. The link in the task resolves inside the task directory
// (it sits deeper there than its ".." count), so a task check that only
// asks whether links stay inside the task lets it through; from the
// shallower fs/var it resolves to /.
func TestBindSourceSwappedForLink(t *testing.T) {
	t.Parallel()
	bw := requireBwrap(t)
	canary, tok := hostCanary(t)
	// Enough ".." to reach / from <TempDir>/t1-sandbox-*/fs/var.
	up := depth(os.TempDir()) + 4
	deep := make([]string, up+1)
	for i := range deep {
		deep[i] = "d"
	}
	linkDir := "environment/" + strings.Join(deep, "/")

	task := func(t *testing.T, dockerfile string) string {
		t.Helper()
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, linkDir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(deepUp(up), filepath.Join(dir, linkDir, "root")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "environment", "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	rel := strings.TrimPrefix(linkDir, "environment/") + "/root"

	for _, c := range []struct{ name, dockerfile string }{
		// The published attack: a link to the fs directory, then a COPY
		// through it onto var/tmp.
		{"dockerfile through /app/up", "FROM ubuntu:24.04\nRUN ln -s .. /app/up\nCOPY " + rel + " /app/up/var/tmp\n"},
		// The same without the detour: COPY a link straight onto a bind
		// source.
		{"dockerfile onto /var/tmp", "FROM ubuntu:24.04\nCOPY " + rel + " /var/tmp\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb, err := bw.Start(context.Background(), sandbox.Spec{TaskDir: task(t, c.dockerfile)})
			if err != nil {
				t.Logf("Start refused the task: %v", err)
				return
			}
			defer sb.Close()
			probeHost(t, sb, canary, tok)
		})
	}

	for _, c := range []struct {
		name    string
		entries []tar.Header
	}{
		{"layer through app/up", []tar.Header{
			{Name: "app/up", Typeflag: tar.TypeSymlink, Linkname: ".."},
			{Name: "app/up/var/tmp", Typeflag: tar.TypeSymlink, Linkname: deepUp(up)},
		}},
		{"layer onto var/tmp", []tar.Header{
			{Name: "var/tmp", Typeflag: tar.TypeSymlink, Linkname: deepUp(up)},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var layer bytes.Buffer
			tw := tar.NewWriter(&layer)
			for _, h := range c.entries {
				h.Mode, h.Format = 0o777, tar.FormatPAX
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
			}
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			sb := sandboxtest.Start(t, bw, sandbox.Spec{})
			if err := sb.Restore(context.Background(), &layer); err != nil {
				t.Logf("Restore refused the layer: %v", err)
			}
			probeHost(t, sb, canary, tok)
		})
	}
}

// TestCopyThroughLinkedDirectory: the build context holds a link to a
// host directory (or is one, or its Dockerfile is a link to a host file);
// the host runs COPY as root and would read the host's files into the
// sandbox. Start is the entry point `t1 sandbox run --task` and every
// other caller goes through, so the check must be there.
func TestCopyThroughLinkedDirectory(t *testing.T) {
	t.Parallel()
	bw := requireBwrap(t)
	host := t.TempDir() // 0700, root's: only the host process can read it
	tok := token(t)
	if err := os.WriteFile(filepath.Join(host, "secret"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "Dockerfile"), []byte("COPY secret /app/secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		build func(t *testing.T, env string)
	}{
		{"COPY h/secret", func(t *testing.T, env string) {
			mustSymlink(t, host, filepath.Join(env, "h"))
			mustWrite(t, filepath.Join(env, "Dockerfile"), "FROM ubuntu:24.04\nCOPY h/secret /app/secret\n")
		}},
		{"COPY glob through h", func(t *testing.T, env string) {
			mustSymlink(t, host, filepath.Join(env, "h"))
			mustWrite(t, filepath.Join(env, "Dockerfile"), "COPY h/* /app/\n")
		}},
		{"environment is a link", func(t *testing.T, env string) {
			if err := os.Remove(env); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, host, env)
		}},
		{"Dockerfile is a link", func(t *testing.T, env string) {
			mustSymlink(t, filepath.Join(host, "secret"), filepath.Join(env, "Dockerfile"))
		}},
		{"setup.sh build context link", func(t *testing.T, env string) {
			mustSymlink(t, host, filepath.Join(env, "h"))
			mustWrite(t, filepath.Join(env, "setup.sh"), "cat h/secret > /app/secret 2>/dev/null || true\n")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			task := t.TempDir()
			env := filepath.Join(task, "environment")
			if err := os.Mkdir(env, 0o755); err != nil {
				t.Fatal(err)
			}
			c.build(t, env)
			sb, err := bw.Start(context.Background(), sandbox.Spec{TaskDir: task})
			if err != nil {
				if strings.Contains(err.Error(), tok) {
					t.Errorf("the error echoes the host file: %v", err)
				}
				t.Logf("Start refused the task: %v", err)
				return
			}
			defer sb.Close()
			res, err := sb.Exec(context.Background(), sandbox.Cmd{Script: "cat /app/secret /app/* 2>/dev/null"})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(res.Stdout, tok) {
				t.Errorf("the sandbox holds a root-only host file: %q", res.Stdout)
			}
		})
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDownloadNeverFollowsLinks: the host's copy of a sandbox directory
// already holds a link (from an earlier download, or the caller's), and
// the sandbox now has a directory of that name: writing the download
// must not follow the link onto the host.
func TestDownloadNeverFollowsLinks(t *testing.T) {
	t.Parallel()
	bw := requireBwrap(t)
	for _, be := range []sandbox.Backend{bw, &sandbox.Plain{}} {
		t.Run(be.Name(), func(t *testing.T) {
			outside := t.TempDir()
			sb := sandboxtest.Start(t, be, sandbox.Spec{})
			sh := sb.Info().CommandPath
			if r, err := sb.Exec(context.Background(), sandbox.Cmd{Script: "mkdir -p " + sh("/app/out/x") + " && echo planted > " + sh("/app/out/x/f")}); err != nil || r.ExitCode != 0 {
				t.Fatalf("%v %+v", err, r)
			}
			dst := filepath.Join(t.TempDir(), "copy")
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, outside, filepath.Join(dst, "x"))
			_ = sb.Download(context.Background(), "/app/out", dst)
			if _, err := os.Lstat(filepath.Join(outside, "f")); err == nil {
				t.Errorf("Download wrote through a link at the destination into %s", outside)
			}
		})
	}
}

// TestAttemptDirectoriesPrivate: a command that opens up its directories
// (chmod 777 /app) must not open them to other local users, whose
// processes run outside every sandbox.
func TestAttemptDirectoriesPrivate(t *testing.T) {
	t.Parallel()
	bw := requireBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another local user")
	}
	sb := sandboxtest.Start(t, bw, sandbox.Spec{})
	tok := token(t)
	if r, err := sb.Exec(context.Background(), sandbox.Cmd{Script: "chmod 777 /app /root /logs && echo " + tok + " > /app/f && chmod 644 /app/f && cp /app/f /root/f"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	info := sb.Info()
	for _, probe := range []string{
		"ls " + info.Root,
		"ls " + filepath.Join(info.Root, "fs"),
		"ls " + info.Paths["/app"],
		"cat " + filepath.Join(info.Paths["/app"], "f"),
		"cat " + filepath.Join(info.Paths["/root"], "f"),
		"touch " + filepath.Join(info.Paths["/app"], "other-user-was-here"),
	} {
		cmd := exec.Command("/bin/sh", "-c", probe)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: true}}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("another local user (uid 65534) ran %q: %s", probe, out)
		}
		if strings.Contains(string(out), tok) {
			t.Errorf("another local user read the attempt's file: %s", out)
		}
	}
}
