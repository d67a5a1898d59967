package image

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/t1pipe/t1/infra/sandbox"
)

// editsTask is an image with configuration, data and a program outside
// the writable directories, for a solution to edit and delete.
func editsTask(t *testing.T) *Result {
	cache, base := testBase(t)
	res, err := Build(context.Background(), writeTask(t, `FROM debian:bookworm
RUN printf 'mode=old\n' > /etc/t1app.conf && mkdir -p /etc/t1.d /opt/t1/bin /var/www && echo a > /etc/t1.d/a && echo b > /etc/t1.d/b \
 && echo stale > /opt/t1/stale.txt && echo '<h1>old</h1>' > /var/www/index.html \
 && printf '#!/bin/sh\necho real\n' > /opt/t1/bin/tool && chmod 755 /opt/t1/bin/tool
`, map[string]string{}), Options{CacheDir: cache, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// carry runs script in a sandbox on img, snapshots it, restores the
// layer into a fresh sandbox on img and returns that one (closed with
// the test).
func carry(t *testing.T, img *sandbox.Image, script string) sandbox.Sandbox {
	t.Helper()
	ctx := context.Background()
	be := bwrap(t)
	src, err := be.Start(ctx, sandbox.Spec{Image: img})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if r := exec1(t, src, script); r.ExitCode != 0 {
		t.Fatalf("the solution failed: %+v", r)
	}
	var layer bytes.Buffer
	if err := src.Snapshot(ctx, &layer); err != nil {
		t.Fatal(err)
	}
	dst, err := be.Start(ctx, sandbox.Spec{Image: img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dst.Close() })
	if err := dst.Restore(ctx, &layer); err != nil {
		t.Fatal(err)
	}
	return dst
}

func restoreNotes(sb sandbox.Sandbox) string {
	var n []string
	for _, s := range sb.Info().Notes {
		if strings.HasPrefix(s, sandbox.RestoreNote) {
			n = append(n, s)
		}
	}
	return strings.Join(n, "\n")
}

// TestRestoreAppliesEditsAndDeletions: a solution that edits the
// image's configuration and data outside /app, deletes a file and a
// directory of it and adds a file to /etc gets all of it into a fresh
// sandbox restored from its snapshot, on the kernel overlay and on
// fuse-overlayfs alike.
func TestRestoreAppliesEditsAndDeletions(t *testing.T) {
	res := editsTask(t)
	fuse := *res.Image
	fuse.FUSE = true
	for name, img := range map[string]*sandbox.Image{"overlay": res.Image, "fuse-overlayfs": &fuse} {
		t.Run(name, func(t *testing.T) {
			dst := carry(t, img, `set -e
sed -i s/old/new/ /etc/t1app.conf
rm /opt/t1/stale.txt
rm -r /etc/t1.d
echo '<h1>new</h1>' > /var/www/index.html
echo added > /etc/t1-added.conf`)
			r := exec1(t, dst, `cat /etc/t1app.conf /var/www/index.html /etc/t1-added.conf; test -e /opt/t1/stale.txt && echo STALE; test -e /etc/t1.d && echo T1.D; /opt/t1/bin/tool`)
			if want := "mode=new\n<h1>new</h1>\nadded\nreal\n"; r.Stdout != want {
				t.Errorf("restored sandbox printed %q (stderr %q), want %q", r.Stdout, r.Stderr, want)
			}
			if n := restoreNotes(dst); n != "" {
				t.Errorf("restore refused some of the solution's changes: %s", n)
			}
		})
	}
}

// TestRestoreRefusesRootTakeovers: root changes that would reach the
// verifier's programs or start-up configuration, or make the host
// follow a link, never reach the restored sandbox. The solution edits
// and deletes programs (a command in /usr/bin, a program below a bin/
// in /opt, a tree holding one), writes the loader's preload list and
// NSS's configuration, and turns a configuration file into an
// executable; a crafted layer adds a hard link, a device, an entry below
// a link it planted itself, or deletes the mount point of /var/tmp.
func TestRestoreRefusesRootTakeovers(t *testing.T) {
	res := editsTask(t)
	dst := carry(t, res.Image, `set -e
printf '#!/bin/sh\necho forged\n' > /usr/bin/tac
rm /usr/bin/yes
printf '#!/bin/sh\necho forged\n' > /opt/t1/bin/tool
echo /app/evil.so > /etc/ld.so.preload
echo 'passwd: files evil' > /etc/nsswitch.conf
printf '#!/bin/sh\necho forged\n' > /etc/t1app.conf && chmod 755 /etc/t1app.conf
mkdir -p /usr/local/lib/python3.11/dist-packages /opt/venv/lib/python3.11/site-packages
echo 'import os' > /usr/local/lib/python3.11/dist-packages/t1evil.pth
echo 'import os' > /opt/venv/lib/python3.11/site-packages/sitecustomize.py
echo '#!/bin/sh' > /conftest.py`)
	r := exec1(t, dst, `echo x | tac; test -e /usr/bin/yes && echo yes-present; /opt/t1/bin/tool; test -e /etc/ld.so.preload && echo PRELOAD; cat /etc/nsswitch.conf 2>/dev/null | grep -c evil; cat /etc/t1app.conf; test -x /etc/t1app.conf && echo EXECUTABLE
ls /usr/local/lib/python3.11/dist-packages/t1evil.pth /opt/venv/lib/python3.11/site-packages/sitecustomize.py /conftest.py 2>&1 | grep -vc 'No such file'`)
	if want := "x\nyes-present\nreal\n0\nmode=old\n0\n"; r.Stdout != want {
		t.Errorf("restored sandbox printed %q (stderr %q), want %q", r.Stdout, r.Stderr, want)
	}
	notes := restoreNotes(dst)
	for _, n := range []string{"usr/bin/tac", "usr/bin/.wh.yes", "opt/t1/bin/tool", "etc/ld.so.preload", "etc/nsswitch.conf", "etc/t1app.conf", "t1evil.pth", "sitecustomize.py", "conftest.py"} {
		if !strings.Contains(notes, n) {
			t.Errorf("the restore's notes do not name %s: %s", n, notes)
		}
	}
	// Removing a tree that holds a program is refused whole.
	dst = carry(t, res.Image, "rm -rf /opt/t1")
	if r := exec1(t, dst, "/opt/t1/bin/tool; cat /opt/t1/stale.txt"); r.Stdout != "real\nstale\n" {
		t.Errorf("after a refused rm -rf /opt/t1: %q %q", r.Stdout, r.Stderr)
	}
	if !strings.Contains(restoreNotes(dst), "opt/.wh.t1") {
		t.Errorf("the refused deletion is not named: %s", restoreNotes(dst))
	}

	ctx := context.Background()
	for name, entries := range map[string][]tar.Header{
		"hard link":   {{Name: "etc/t1link", Typeflag: tar.TypeLink, Linkname: "etc/shadow"}},
		"device":      {{Name: "etc/t1dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666}},
		"mount point": {{Name: "var/.wh.tmp", Typeflag: tar.TypeReg, Mode: 0o600}},
		"link then below it": {{Name: "etc/t1esc", Typeflag: tar.TypeSymlink, Linkname: "/"},
			{Name: "etc/t1esc/tmp/t1-planted-by-layer", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}},
	} {
		var layer bytes.Buffer
		tw := tar.NewWriter(&layer)
		for _, h := range entries {
			h.Format = tar.FormatPAX
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatal(err)
			}
			if h.Size > 0 {
				tw.Write([]byte("x"))
			}
		}
		tw.Close()
		sb, err := bwrap(t).Start(ctx, sandbox.Spec{Image: res.Image})
		if err != nil {
			t.Fatal(err)
		}
		err = sb.Restore(ctx, &layer)
		if last := entries[len(entries)-1].Name; err == nil && !strings.Contains(restoreNotes(sb), last) {
			t.Errorf("%s: restored without an error or a note refusing %s", name, last)
		}
		r := exec1(t, sb, "ls -d /etc/t1link /etc/t1dev /tmp/t1-planted-by-layer 2>/dev/null")
		if r.Stdout != "" {
			t.Errorf("%s: the restored sandbox has %q", name, r.Stdout)
		}
		sb.Close()
		if _, err := os.Lstat("/tmp/t1-planted-by-layer"); err == nil {
			os.Remove("/tmp/t1-planted-by-layer")
			t.Errorf("%s: the layer wrote to the host's /tmp", name)
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestRestoreAppliesWorkdirChanges: the image's WORKDIR (/workspace here)
// is the task's working directory, as /app is: every change there reaches
// the restored sandbox, an edit of the image's own script included, and
// a new top-level data directory is applied as one under /srv would be.
// A WORKDIR among the system's directories opens nothing: an edit of
// /usr/bin/tac from a WORKDIR of /usr/bin is still refused.
func TestRestoreAppliesWorkdirChanges(t *testing.T) {
	cache, base := testBase(t)
	ctx := context.Background()
	res, err := Build(ctx, writeTask(t, "FROM debian:bookworm\nWORKDIR /workspace\nRUN printf '#!/bin/sh\\necho old\\n' > build.sh && chmod 755 build.sh && echo stale > stale.txt\n",
		map[string]string{}), Options{CacheDir: cache, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	dst := carry(t, res.Image, `set -e
printf '#!/bin/sh\necho new\n' > /workspace/build.sh
rm /workspace/stale.txt
mkdir -p /workspace/out /data
touch /workspace/out/done
echo d > /data/input.csv`)
	r := exec1(t, dst, "./build.sh; test -e stale.txt && echo STALE; ls out; cat /data/input.csv")
	if want := "new\ndone\nd\n"; r.Stdout != want {
		t.Errorf("restored sandbox printed %q (stderr %q), want %q", r.Stdout, r.Stderr, want)
	}
	if n := restoreNotes(dst); n != "" {
		t.Errorf("restore refused some of the solution's changes: %s", n)
	}

	sys, err := Build(ctx, writeTask(t, "FROM debian:bookworm\nWORKDIR /usr/bin\n", map[string]string{}), Options{CacheDir: cache, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	dst = carry(t, sys.Image, `printf '#!/bin/sh\necho forged\n' > /usr/bin/tac`)
	if r := exec1(t, dst, "echo x | tac"); r.Stdout != "x\n" || !strings.Contains(restoreNotes(dst), "usr/bin/tac") {
		t.Errorf("an edit of /usr/bin/tac from a WORKDIR of /usr/bin: %q %q, notes %s", r.Stdout, r.Stderr, restoreNotes(dst))
	}
}
