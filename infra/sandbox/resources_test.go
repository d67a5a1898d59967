package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The attacks on the disk budget and on snapshots, each written out, at
// a 20 MiB budget of 1024 inodes so that they run in a second or two.

const attackDisk, attackInodes = 20 << 20, 1024

// bwrapSandbox starts a bubblewrap sandbox under a 20 MiB disk budget, or
// skips (fails with T1_REQUIRE_BWRAP=1) where bubblewrap cannot run.
func bwrapSandbox(t *testing.T) Sandbox {
	t.Helper()
	bw := &Bubblewrap{}
	err := bw.Available()
	if err == nil {
		err = Cgroups()
	}
	if err != nil {
		if os.Getenv("T1_REQUIRE_BWRAP") == "1" {
			t.Fatalf("T1_REQUIRE_BWRAP=1 but: %v", err)
		}
		t.Skipf("bubblewrap unavailable: %v", err)
	}
	if measureOnly && testing.Short() {
		t.Skip("the measured fallback's attacks write to the host's disk (seconds): skipped with -short")
	}
	sb, err := bw.Start(context.Background(), Spec{Limits: Limits{Disk: attackDisk, Inodes: attackInodes}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

func python(t *testing.T, sb Sandbox, script string) Result {
	t.Helper()
	r, err := sb.Exec(context.Background(), Cmd{Args: []string{"python3", "-c", script}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// firstInt is the first line of out as a number (what the attack managed
// to store before the kernel, or the watch, stopped it).
func firstInt(t *testing.T, r Result) int64 {
	t.Helper()
	line, _, _ := strings.Cut(r.Stdout, "\n")
	n, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		t.Fatalf("no count in the attack's output: %+v", r)
	}
	return n
}

// kernelBound says that, where the kernel enforces the budget, the attack
// stored at most the budget (plus the page that makes going past it seen).
func kernelBound(t *testing.T, sb Sandbox, r Result, what string) {
	t.Helper()
	if sb.Info().Disk != DiskTmpfs {
		return // measured: the watch kills the attack, after it stored more
	}
	if stored := firstInt(t, r); stored > attackDisk+int64(os.Getpagesize()) {
		t.Errorf("%s: stored %s under a %s budget", what, FormatSize(stored), FormatSize(attackDisk))
	}
}

func exceeded(t *testing.T, r Result, what string) {
	t.Helper()
	if !r.DiskExceeded || !strings.Contains(r.Stderr, "disk limit exceeded") || r.ExitCode == 0 {
		t.Errorf("%s: not reported as over the disk limit: %+v", what, r)
	}
}

// A tree deeper than PATH_MAX, which a walk by path names cannot enter,
// holding 30 MiB.
func TestDiskAttackDeepTree(t *testing.T) {
	forEachDiskMode(t, func(t *testing.T) {
		sb := bwrapSandbox(t)
		r := python(t, sb, `
import os, sys, time
os.chdir("/app")
for _ in range(600):
    os.mkdir("dddddddd"); os.chdir("dddddddd")
n = 0
try:
    with open("f", "wb", buffering=0) as f:
        for _ in range(30):
            n += f.write(b"x" * (1 << 20))
except OSError:
    pass
print(n, flush=True)
time.sleep(2)
`)
		exceeded(t, r, "30 MiB deeper than PATH_MAX")
		kernelBound(t, sb, r, "deep tree")
	})
}

// A file deleted while held open keeps its blocks: 30 MiB no name points
// to.
func TestDiskAttackDeletedOpenFile(t *testing.T) {
	forEachDiskMode(t, func(t *testing.T) {
		sb := bwrapSandbox(t)
		r := python(t, sb, `
import os, time
f = open("/app/x", "wb", buffering=0)
os.unlink("/app/x")
n = 0
try:
    for _ in range(30):
        n += f.write(b"x" * (1 << 20))
except OSError:
    pass
print(n, flush=True)
time.sleep(2)
`)
		exceeded(t, r, "30 MiB deleted but open")
		kernelBound(t, sb, r, "deleted open file")
	})
}

// Empty files take no blocks, but each takes an inode.
func TestDiskAttackInodes(t *testing.T) {
	forEachDiskMode(t, func(t *testing.T) {
		sb := bwrapSandbox(t)
		r := python(t, sb, `
import os, time
n = 0
try:
    for i in range(1500):
        open("/tmp/e%d" % i, "w").close(); n += 1
except OSError:
    pass
print(n, flush=True)
time.sleep(2)
`)
		exceeded(t, r, "1500 empty files under a 1024-inode budget")
		if sb.Info().Disk != DiskTmpfs {
			return
		}
		if n := firstInt(t, r); n > sb.Info().Limits.Inodes {
			t.Errorf("created %d files under a %d-inode budget", n, sb.Info().Limits.Inodes)
		}
	})
}

// Writers in parallel fill faster than any measurement: only the kernel
// stops them at the budget.
func TestDiskAttackParallelWriters(t *testing.T) {
	t.Parallel()
	sb := bwrapSandbox(t)
	if sb.Info().Disk != DiskTmpfs {
		t.Skip("measured budgets are checked every 200 ms; parallel writers overshoot them (only a root caller's tmpfs stops them)")
	}
	r, err := sb.Exec(context.Background(), Cmd{Script: `for i in 1 2 3 4; do head -c 8388608 /dev/zero > /app/f$i 2>/dev/null & done; wait; sleep 1`, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	exceeded(t, r, "4 × 8 MiB at once")
	stored, err := sb.Exec(context.Background(), Cmd{Script: "cat /app/f* | wc -c"})
	if err != nil {
		t.Fatal(err)
	}
	kernelBound(t, sb, stored, "parallel writers")
}

// A 32 MiB file holding 1 MiB of data: its layer carries the data, not
// the holes, and the restored file is as sparse.
func TestSnapshotSparseFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := bwrapSandbox(t), bwrapSandbox(t)
	mk := `truncate -s 32M /app/sparse && head -c 1048576 /dev/urandom | dd of=/app/sparse bs=1M seek=20 conv=notrunc status=none && printf tail | dd of=/app/sparse bs=1 seek=1000 conv=notrunc status=none && sha256sum /app/sparse`
	ra, err := a.Exec(ctx, Cmd{Script: mk})
	if err != nil || ra.ExitCode != 0 {
		t.Fatalf("%+v %v", ra, err)
	}
	var layer bytes.Buffer
	if err := a.Snapshot(ctx, &layer); err != nil {
		t.Fatal(err)
	}
	if layer.Len() > 2<<20 {
		t.Errorf("the layer of a 32 MiB file with 1 MiB of data is %s", FormatSize(int64(layer.Len())))
	}
	// Standard readers see the file whole.
	tr := tar.NewReader(bytes.NewReader(layer.Bytes()))
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "app/sparse" {
			found = h.Size == 32<<20
		}
	}
	if !found {
		t.Error("archive/tar does not read app/sparse back as a 32 MiB file")
	}
	if err := b.Restore(ctx, bytes.NewReader(layer.Bytes())); err != nil {
		t.Fatal(err)
	}
	rb, err := b.Exec(ctx, Cmd{Script: "sha256sum /app/sparse; stat -c %b:%B /app/sparse"})
	if err != nil || rb.ExitCode != 0 {
		t.Fatalf("%+v %v", rb, err)
	}
	sum, alloc, _ := strings.Cut(rb.Stdout, "\n")
	if sum+"\n" != ra.Stdout {
		t.Errorf("restored contents differ: %q, want %q", sum, ra.Stdout)
	}
	var blocks, unit int64
	if f := strings.Split(strings.TrimSpace(alloc), ":"); len(f) == 2 {
		blocks, _ = strconv.ParseInt(f[0], 10, 64)
		unit, _ = strconv.ParseInt(f[1], 10, 64)
	}
	if used := blocks * unit; used == 0 || used > 2<<20 {
		t.Errorf("the restored file allocates %d bytes, want about 1 MiB", used)
	}
	if r, _ := b.Exec(ctx, Cmd{Script: "true"}); r.DiskExceeded || strings.Contains(r.Stderr, "disk limit") {
		t.Errorf("the restored sandbox is over its budget: %+v", r)
	}
}

// A sparse file of more than 16 × the budget (what restoring would read
// through) does not go into a layer, nor does a layer that has one come
// out of one.
func TestSnapshotLogicalBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := bwrapSandbox(t)
	if r, err := sb.Exec(ctx, Cmd{Script: "truncate -s 400M /app/huge"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	var layer bytes.Buffer
	if err := sb.Snapshot(ctx, &layer); !errors.Is(err, ErrLayerLimit) {
		t.Errorf("snapshot of a 400 MiB sparse file under a 20 MiB budget: %v (%s), want ErrLayerLimit", err, FormatSize(int64(layer.Len())))
	}
}

// A path past PATH_MAX cannot go into a layer: Snapshot says so rather
// than failing on the name.
func TestSnapshotDeepPath(t *testing.T) {
	t.Parallel()
	sb := bwrapSandbox(t)
	if r := python(t, sb, "import os\nos.chdir('/app')\nfor _ in range(600):\n    os.mkdir('dddddddd'); os.chdir('dddddddd')\n"); r.ExitCode != 0 {
		t.Fatalf("%+v", r)
	}
	if err := sb.Snapshot(context.Background(), io.Discard); !errors.Is(err, ErrLayerLimit) {
		t.Errorf("snapshot of a path past PATH_MAX: %v, want ErrLayerLimit", err)
	}
}

// A background job that keeps replacing a file with a fifo: opening the
// fifo for reading would wait for a writer forever.
func TestSnapshotFifoSwap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := bwrapSandbox(t)
	sh, err := sb.Shell(ctx, ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if r, err := sh.Run(ctx, "(while :; do rm -f /app/f; mkfifo /app/f; rm -f /app/f; echo x > /app/f; done) >/dev/null 2>&1 &", RunOptions{Timeout: 10 * time.Second}); err != nil || r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	done := make(chan error, 1)
	go func() {
		// The scan must see the file and the open the fifo: try for
		// two seconds (thousands of snapshots; hundreds with -short).
		budget := 2 * time.Second
		if testing.Short() {
			budget = 500 * time.Millisecond
		}
		for end := time.Now().Add(budget); time.Now().Before(end); {
			if err := sb.Snapshot(ctx, io.Discard); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("snapshot while a job swaps a file for a fifo: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("snapshot hung on a fifo")
	}
}
