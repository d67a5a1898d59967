// Package testinfra gives tests the real servers they run against: an S3
// gateway (package gateway) shared by the test binaries of the machine,
// with a bucket of its own for each test binary and a key prefix of its
// own for every test, and an embedded JetStream server per test on a
// random port in the test's temporary directory.
//
// The gateway runs out of process (internal/testinfra/gatewayd, built and
// started by the first test binary that finds none) because linking it
// into every test binary cost more than most of them spend testing.
package testinfra

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/bus"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/infra/s3"
	"github.com/t1pipe/t1/infra/s3/embedded"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/store"
)

var (
	shared  *s3.Config
	workDir string
)

// WorkDir is the working directory the test binary started in (the
// package directory), against which testdata paths resolve: a test that
// runs an embedded gateway (package gateway) in process has its working
// directory moved while it runs.
func WorkDir() string { return workDir }

// BuildT1 builds the t1 command into dir and returns its path, for tests
// that drive the real command.
func BuildT1(dir string) (string, error) { return build(dir, "t1", "./cmd/t1") }

// ExecTrainer builds trainer/testdata/exectrainer, the stand-in external
// trainer of the exec backend's tests, and returns the argv of an exec
// trainer running it: it reads {job}, writes {out}, and trains with the
// reference backend on the test's store (StoreConfig) with the job file's
// hyperparameters. Tests append the stand-in's other flags. Linking the program
// takes seconds, so -short skips the test.
func ExecTrainer(t testing.TB) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the stand-in external trainer: skipped with -short")
	}
	dir := t.TempDir()
	bin, err := build(dir, "exectrainer", "./trainer/testdata/exectrainer")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := json.Marshal(map[string]any{"store": StoreConfig(t)})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "reference.json")
	if err := os.WriteFile(path, ref, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{bin, "-job", "{job}", "-out", "{out}", "-reference", path}
}

// build builds the module's package pkg into dir/name. It finds the
// module from this file, not from the working directory, which an
// embedded gateway moves.
func build(dir, name, pkg string) (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("build %s: cannot locate the module", name)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Join(filepath.Dir(self), "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", name, err, out)
	}
	return bin, nil
}

// Main runs the tests of a package that uses Store; call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }
//
// Like Run, it runs parallel tests four at a time unless -parallel is
// given.
func Main(m *testing.M) int {
	embedded.Executable = Gatewayd
	if err := parallelDefault(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var err error
	if workDir, err = os.Getwd(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, release, err := useGateway()
	if err != nil {
		fmt.Fprintln(os.Stderr, "S3 gateway for the tests:", err)
		return 1
	}
	shared = &cfg
	code := m.Run()
	if err := release(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return HostLeft(code)
}

// Run runs the tests of a package that needs no store, then HostLeft;
// call it from TestMain. Unless -parallel is given, the package's parallel
// tests run four at a time, as make test runs them: they wait on
// processes, sandboxes, servers and timeouts more than they compute, and
// at the default of one per core a package of them leaves its cores
// mostly idle.
func Run(m *testing.M) int {
	embedded.Executable = Gatewayd
	if err := parallelDefault(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return HostLeft(m.Run())
}

func parallelDefault() error {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return nil
	}
	return flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0))))
}

// HostLeft fails a test binary (code 1 unless it failed already) that
// ends with a mount, cgroup, directory or file still recorded (hostres)
// by this process: a Close or error path that did not remove what it
// made. What t1 processes it started and killed left is removed and
// listed, since the next t1 start would have removed it. Either way the
// host is as the tests found it.
func HostLeft(code int) int {
	own, children := hostres.Leaks()
	if len(children) > 0 {
		fmt.Fprintf(os.Stderr, "removed what ended t1 processes of these tests left:\n  %s\n", strings.Join(children, "\n  "))
	}
	if len(own) > 0 {
		fmt.Fprintf(os.Stderr, "the tests left on the host (now removed):\n  %s\n", strings.Join(own, "\n  "))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Store returns a client of the shared gateway whose keys live under a
// prefix named for the test: no other test uses it, and every call within
// one test sees the same objects.
func Store(t testing.TB) store.ObjectStore {
	t.Helper()
	return open(t, StoreConfig(t))
}

var fresh atomic.Int64

// FreshStore is Store under a prefix of its own for this call: it starts
// empty, however often the test runs (go test -count).
func FreshStore(t testing.TB) store.ObjectStore {
	t.Helper()
	cfg := StoreConfig(t)
	cfg.Prefix += "-" + strconv.FormatInt(fresh.Add(1), 10)
	return open(t, cfg)
}

func open(t testing.TB, cfg s3.Config) store.ObjectStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := s3.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// StoreConfig is the configuration behind Store: the shared gateway's
// endpoint and credentials and the test's own prefix. Tests that reach the
// gateway another way (through a proxy, from a subprocess) start from it.
func StoreConfig(t testing.TB) s3.Config {
	t.Helper()
	if shared == nil {
		t.Fatal("testinfra.Store needs TestMain to call testinfra.Main")
	}
	cfg := *shared
	cfg.Prefix = "test-" + strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return cfg
}

// Log starts an embedded JetStream server for the test and opens the
// event log on it.
func Log(t testing.TB) *engine.Log {
	t.Helper()
	srv, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := bus.Connect(ctx, bus.ConnectOptions{URLs: []string{srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := engine.OpenLog(ctx, nc, engine.LogConfig{DedupWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// RunStage runs a stage until the test ends.
func RunStage(t testing.TB, l *engine.Log, s engine.Stage, cfg engine.RunnerConfig) {
	t.Helper()
	r := engine.NewRunner(l, s, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stage %s: %v", s.Name(), err)
		}
	})
}

// Events reads every event of the log whose subject matches filter.
func Events(t testing.TB, l *engine.Log, filter string) []engine.Event {
	t.Helper()
	var out []engine.Event
	if err := l.Replay(context.Background(), []string{filter}, engine.ReplayFrom{}, func(ev engine.Event) error {
		out = append(out, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Count is how many events of the log match the subject filter, from the
// stream's per-subject counts (cheap enough to poll, unlike a replay).
func Count(t testing.TB, l *engine.Log, filter string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := l.Stream().Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

// CheckFor polls f until it returns nil or total passes.
func CheckFor(t testing.TB, total time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s: %v", total, err)
}

// Bubblewrap returns the bubblewrap sandbox backend, or skips the test
// with the reason when it cannot run here (make setup installs it; CI sets
// T1_REQUIRE_BWRAP=1, which fails the test instead of skipping it).
func Bubblewrap(t testing.TB) *sandbox.Bubblewrap {
	t.Helper()
	bw := &sandbox.Bubblewrap{}
	err := bw.Available()
	if err == nil {
		// Sandboxes with the default limits need a cgroup of their own.
		err = sandbox.Cgroups()
	}
	if err != nil {
		if os.Getenv("T1_REQUIRE_BWRAP") != "" {
			t.Fatalf("bubblewrap is required here: %v", err)
		}
		t.Skipf("bubblewrap unavailable (make setup installs it): %v", err)
	}
	return bw
}

// NATSServer returns the path of a nats-server executable (the Debian
// package nats-server, which make setup installs), or skips the test with
// the reason when there is none; T1_REQUIRE_NATS_SERVER=1 (set by CI when
// the package is installed) fails the test instead of skipping it.
func NATSServer(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("nats-server")
	if err != nil {
		// Debian installs it in /usr/sbin, which is not on every PATH.
		path, err = exec.LookPath("/usr/sbin/nats-server")
	}
	if err != nil {
		if os.Getenv("T1_REQUIRE_NATS_SERVER") != "" {
			t.Fatalf("nats-server is required here: %v", err)
		}
		t.Skipf("nats-server unavailable (make setup installs it): %v", err)
	}
	return path
}

// Runner is a stage runner configuration for tests: quick retries, few
// deliveries.
func Runner(concurrency int) engine.RunnerConfig {
	return engine.RunnerConfig{Concurrency: concurrency, AckWait: 30 * time.Second, MaxDeliver: 3, Backoff: []time.Duration{100 * time.Millisecond}}
}

// Python returns the project's Python interpreter, .venv/bin/python at
// the repository's root (make setup creates it from requirements.txt),
// or skips the test with the reason where there is none; CI sets
// T1_REQUIRE_VENV=1, which fails the test instead of skipping it.
func Python(t testing.TB) string {
	t.Helper()
	dir := WorkDir()
	if dir == "" {
		dir, _ = os.Getwd()
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatalf("no go.mod above %s", WorkDir())
		}
		dir = up
	}
	py := filepath.Join(dir, ".venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("T1_REQUIRE_VENV") != "" {
			t.Fatalf("the project's Python environment is required here: %v", err)
		}
		t.Skipf("no project Python environment (make setup creates .venv): %v", err)
	}
	return py
}
