package sandbox_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	osexec "os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/infra/sandbox"
)

func backends(b *testing.B) []sandbox.Backend {
	bes := []sandbox.Backend{&sandbox.Plain{}}
	bw := &sandbox.Bubblewrap{}
	if err := bw.Available(); err == nil {
		bes = append([]sandbox.Backend{bw}, bes...)
	} else {
		b.Logf("bwrap skipped: %v", err)
	}
	return bes
}

// quiet silences the plain backend's per-start warning during benchmarks.
func quiet(b *testing.B) {
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	b.Cleanup(func() { slog.SetDefault(old) })
}

// BenchmarkStartFirstOutput: from Start of a fresh, empty sandbox to the
// first byte of its first command's output (ms-median, the median over
// iterations) and to that command's end (ms-median-exit).
func BenchmarkStartFirstOutput(b *testing.B) {
	quiet(b)
	ctx := context.Background()
	for _, be := range backends(b) {
		b.Run(be.Name(), func(b *testing.B) {
			var times, done []time.Duration
			var cpu time.Duration
			for b.Loop() {
				t0, c0 := time.Now(), cpuTime()
				sb, err := be.Start(ctx, sandbox.Spec{})
				if err != nil {
					b.Fatal(err)
				}
				first := &firstWrite{}
				r, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"echo", "ready"}, StreamStdout: first})
				if err != nil || r.Stdout != "ready\n" {
					b.Fatalf("%+v %v", r, err)
				}
				times = append(times, first.at.Sub(t0))
				done = append(done, time.Since(t0))
				cpu += cpuTime() - c0
				b.StopTimer()
				sb.Close()
				b.StartTimer()
			}
			b.ReportMetric(median(times), "ms-median")
			b.ReportMetric(median(done), "ms-median-exit")
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

// firstWrite records when its first byte arrives.
type firstWrite struct{ at time.Time }

func (f *firstWrite) Write(p []byte) (int, error) {
	if f.at.IsZero() && len(p) > 0 {
		f.at = time.Now()
	}
	return len(p), nil
}

// BenchmarkStartBaseline: the floor under BenchmarkStartFirstOutput on
// the same machine: a bare fork and exec of echo, and a bare bwrap with
// the same namespaces running echo (no per-attempt directories, no uid,
// no rlimit prologue).
func BenchmarkStartBaseline(b *testing.B) {
	bare := map[string][]string{"exec-echo": {"/usr/bin/echo", "ready"}}
	if argv := bareBwrap(); argv != nil {
		bare["bwrap-echo"] = argv
	}
	for _, name := range []string{"exec-echo", "bwrap-echo"} {
		argv, ok := bare[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			var times []time.Duration
			var cpu time.Duration
			for b.Loop() {
				t0, c0 := time.Now(), cpuTime()
				out, err := osexec.Command(argv[0], argv[1:]...).Output()
				if err != nil || string(out) != "ready\n" {
					b.Fatalf("%q %v", out, err)
				}
				times = append(times, time.Since(t0))
				cpu += cpuTime() - c0
			}
			b.ReportMetric(median(times), "ms-median")
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

// bareBwrap is a bwrap with the sandbox's namespaces running echo, and
// nothing else: no per-attempt directories, uid, rlimits, seccomp filter
// or cgroup. Nil without bwrap.
func bareBwrap() []string {
	p, err := osexec.LookPath("bwrap")
	if err != nil {
		return nil
	}
	return []string{p, "--unshare-all", "--die-with-parent", "--new-session",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--", "/usr/bin/echo", "ready"}
}

// BenchmarkStartConfined: a confined bwrap sandbox (seccomp filter,
// cgroup, its own uid and directories) from Start to the end of its first
// command, against a bare bwrap running echo, alternated in one loop so
// that both see the same machine load: ms-sandbox, ms-bare (medians) and
// their ratio. Close is not timed.
func BenchmarkStartConfined(b *testing.B) {
	bw := &sandbox.Bubblewrap{}
	argv := bareBwrap()
	if err := bw.Available(); err != nil || argv == nil {
		b.Skipf("bwrap unavailable: %v", err)
	}
	ctx := context.Background()
	var box, bare []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if out, err := osexec.Command(argv[0], argv[1:]...).Output(); err != nil || string(out) != "ready\n" {
			b.Fatalf("%q %v", out, err)
		}
		bare = append(bare, time.Since(t0))
		t0 = time.Now()
		sb, err := bw.Start(ctx, sandbox.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		if r, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"echo", "ready"}}); err != nil || r.Stdout != "ready\n" {
			b.Fatalf("%+v %v", r, err)
		}
		box = append(box, time.Since(t0))
		b.StopTimer()
		sb.Close()
		b.StartTimer()
	}
	b.ReportMetric(median(box), "ms-sandbox")
	b.ReportMetric(median(bare), "ms-bare")
	b.ReportMetric(median(box)/median(bare), "ratio")
}

// BenchmarkShellRun: one command through a warm persistent shell.
func BenchmarkShellRun(b *testing.B) {
	quiet(b)
	ctx := context.Background()
	for _, be := range backends(b) {
		b.Run(be.Name(), func(b *testing.B) {
			sb, err := be.Start(ctx, sandbox.Spec{})
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close()
			sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if r, err := sh.Run(ctx, "echo ok", sandbox.RunOptions{}); err != nil || r.Stdout != "ok\n" {
					b.Fatalf("%+v %v", r, err)
				}
			}
		})
	}
}

// BenchmarkSnapshotRestore: Snapshot of 10 MiB of changes (100 files of
// 100 KiB plus a deletion) and Restore of the layer into a fresh sandbox.
func BenchmarkSnapshotRestore(b *testing.B) {
	quiet(b)
	ctx := context.Background()
	const size = 10 << 20
	for _, be := range backends(b) {
		b.Run(be.Name(), func(b *testing.B) {
			src, err := be.Start(ctx, sandbox.Spec{})
			if err != nil {
				b.Fatal(err)
			}
			defer src.Close()
			dir := src.Info().CommandPath("/app")
			r, err := src.Exec(ctx, sandbox.Cmd{Script: "mkdir -p " + dir + "/data && for i in $(seq 1 100); do head -c 104857 /dev/urandom > " + dir + "/data/f$i; done"})
			if err != nil || r.ExitCode != 0 {
				b.Fatalf("%+v %v", r, err)
			}
			b.SetBytes(size)
			var layer bytes.Buffer
			for b.Loop() {
				b.StopTimer()
				dst, err := be.Start(ctx, sandbox.Spec{})
				if err != nil {
					b.Fatal(err)
				}
				layer.Reset()
				b.StartTimer()
				if err := src.Snapshot(ctx, &layer); err != nil {
					b.Fatal(err)
				}
				if err := dst.Restore(ctx, bytes.NewReader(layer.Bytes())); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				dst.Close()
				b.StartTimer()
			}
		})
	}
}

// cpuTime is the CPU time (user and system) used so far by this process
// and by its waited-for descendants: a measure of the work a start costs
// that, unlike wall time, does not grow when the machine is busy.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}

// BenchmarkExecNetwork: one Exec of true in a warm sandbox, without
// network and with the registries proxy (its listener made in the
// command's network namespace before the command runs, and closed after).
func BenchmarkExecNetwork(b *testing.B) {
	bw := &sandbox.Bubblewrap{}
	if err := bw.Available(); err != nil {
		b.Skip(err)
	}
	if os.Geteuid() != 0 {
		b.Skip("the registries proxy needs root")
	}
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		proxy bool
	}{{"none", false}, {"registries", true}} {
		b.Run(c.name, func(b *testing.B) {
			spec := sandbox.Spec{}
			if c.proxy {
				p, err := egress.New(egress.DefaultHosts)
				if err != nil {
					b.Fatal(err)
				}
				spec.Proxy = p
			}
			sb, err := bw.Start(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close()
			var ms []float64
			for b.Loop() {
				start := time.Now()
				r, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"true"}})
				if err != nil || r.ExitCode != 0 {
					b.Fatalf("%v %+v", err, r)
				}
				ms = append(ms, float64(time.Since(start).Microseconds())/1000)
			}
			slices.Sort(ms)
			b.ReportMetric(ms[len(ms)/2], "ms-median")
		})
	}
}
