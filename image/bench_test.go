package image

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/t1pipe/t1/infra/sandbox"
)

// BenchmarkSandboxStart starts a sandbox, runs one command in it and
// closes it, on the host's system directories and on an image (the bare
// Debian base): the image's cost is its overlay mount and idmapping;
// fuse-overlayfs's (where those cannot be had) starting its daemon; the
// copy's (the fallback without either) a copy of every layer.
func BenchmarkSandboxStart(b *testing.B) {
	cache, base := testBase(b)
	res, err := Build(context.Background(), writeTask(b, "FROM debian:bookworm\n", map[string]string{}), Options{CacheDir: cache, Base: base})
	if err != nil {
		b.Fatal(err)
	}
	be := bwrap(b)
	copied, fuse := *res.Image, *res.Image
	copied.Copy, fuse.FUSE = true, true
	for _, mode := range []struct {
		name string
		spec sandbox.Spec
	}{{"host", sandbox.Spec{}}, {"image", sandbox.Spec{Image: res.Image}}, {"fuse", sandbox.Spec{Image: &fuse}}, {"copy", sandbox.Spec{Image: &copied}}} {
		b.Run(mode.name, func(b *testing.B) {
			for b.Loop() {
				sb, err := be.Start(context.Background(), mode.spec)
				if err != nil {
					b.Fatal(err)
				}
				if r := exec1(b, sb, "true"); r.ExitCode != 0 {
					b.Fatal(r)
				}
				sb.Close()
			}
		})
	}
}

// BenchmarkRebuild is a build every layer of which is in the cache.
func BenchmarkRebuild(b *testing.B) {
	cache, base := testBase(b)
	task := writeTask(b, "FROM debian:bookworm\nENV A=1\nWORKDIR /app\nCOPY f /app/\n", map[string]string{"f": "x"})
	opt := Options{CacheDir: cache, Base: base}
	if _, err := Build(context.Background(), task, opt); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Build(context.Background(), task, opt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshotRootChanges is Snapshot and Restore into a fresh
// sandbox of 4 MiB written as 64 files, in /app (a writable directory)
// and in /usr/local/lib (the overlay's upper directory, restored through
// the verifier's guard), on the bare Debian base.
func BenchmarkSnapshotRootChanges(b *testing.B) {
	cache, base := testBase(b)
	res, err := Build(context.Background(), writeTask(b, "FROM debian:bookworm\n", map[string]string{}), Options{CacheDir: cache, Base: base})
	if err != nil {
		b.Fatal(err)
	}
	be := bwrap(b)
	ctx := context.Background()
	for _, dir := range []string{"/app/t1bench", "/usr/local/lib/t1bench"} {
		b.Run(strings.SplitN(dir[1:], "/", 2)[0], func(b *testing.B) {
			src, err := be.Start(ctx, sandbox.Spec{Image: res.Image})
			if err != nil {
				b.Fatal(err)
			}
			defer src.Close()
			if r := exec1(b, src, "mkdir -p "+dir+" && for i in $(seq 64); do head -c 65536 /dev/zero | tr '\\0' x > "+dir+"/f$i; done"); r.ExitCode != 0 {
				b.Fatal(r)
			}
			for b.Loop() {
				var layer bytes.Buffer
				if err := src.Snapshot(ctx, &layer); err != nil {
					b.Fatal(err)
				}
				dst, err := be.Start(ctx, sandbox.Spec{Image: res.Image})
				if err != nil {
					b.Fatal(err)
				}
				if err := dst.Restore(ctx, &layer); err != nil {
					b.Fatal(err)
				}
				if r := exec1(b, dst, "test -s "+dir+"/f64"); r.ExitCode != 0 {
					b.Fatal(r)
				}
				dst.Close()
			}
		})
	}
}
