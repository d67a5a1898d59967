package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/t1pipe/t1/digest"
	"github.com/t1pipe/t1/engine"

	"github.com/t1pipe/t1/internal/testinfra"
)

// equalPipeline is tinyPipeline with a short ack wait, so that work a
// killed process held comes back in seconds. The engine section does not
// feed event ids, so its runs digest like tinyPipeline's.
const equalPipeline = tinyPipeline + `engine:
  ack_wait: 6s
  heartbeat: 2s
`

// pipelineStages are the stages of the tiny pipeline, one `t1 worker` each.
var pipelineStages = []string{"control", "synth", "audit", "rollout", "reward", "critic", "ppo", "sft", "eval"}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// finish runs cmd to its end, killing it after limit, and returns its
// standard output.
func finish(t *testing.T, cmd *exec.Cmd, limit time.Duration) ([]byte, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(limit, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	if err != nil {
		err = fmt.Errorf("%v: %v\n%s", cmd.Args, err, stderr.String())
	}
	return stdout.Bytes(), err
}

// completeRun runs `t1 run` (with extra arguments) to the end of the run
// and fails the test unless the run completed.
func completeRun(t *testing.T, data, cfg string, extra ...string) {
	t.Helper()
	out, err := finish(t, command(t, data, cfg, append([]string{"run", "--json", "--log-level", "warn"}, extra...)...), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Status string            `json:"status"`
		Reason string            `json:"reason"`
		Events map[string]uint64 `json:"events"`
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if sum.Status != "completed" {
		t.Fatalf("run ended %s (%s): %+v", sum.Status, sum.Reason, sum.Events)
	}
}

func readDigest(t *testing.T, data, cfg string) *digest.Digest {
	t.Helper()
	return runDigest(t, data, cfg, "tiny")
}

// runDigest is run's digest in data.
func runDigest(t *testing.T, data, cfg, run string) *digest.Digest {
	t.Helper()
	out, err := finish(t, command(t, data, cfg, "digest", "--run", run, "--json"), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var d digest.Digest
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return &d
}

// sameDigest fails the test unless got equals want with nothing stored
// twice.
func sameDigest(t *testing.T, want, got *digest.Digest) {
	t.Helper()
	if got.Duplicates.Total() != 0 {
		t.Errorf("duplicates %+v", got.Duplicates)
	}
	if diff := want.Diff(got); len(diff) > 0 || want.SHA256 != got.SHA256 {
		t.Fatalf("digest %s differs from the uninterrupted run's %s:\n%s", got.SHA256, want.SHA256, strings.Join(diff, "\n"))
	}
}

var baseline struct {
	once sync.Once
	d    *digest.Digest
	err  error
}

// baselineDigest is the digest of one uninterrupted single-process run of
// equalPipeline, made once per test binary.
func baselineDigest(t *testing.T) *digest.Digest {
	t.Helper()
	baseline.once.Do(func() {
		t0 := time.Now()
		baseline.d, baseline.err = uninterrupted(equalPipeline)
		if baseline.err == nil {
			t.Logf("uninterrupted run: digest %s in %s", baseline.d.SHA256, time.Since(t0).Round(time.Second))
		}
	})
	if baseline.err != nil {
		t.Fatal(baseline.err)
	}
	if baseline.d.Duplicates.Total() != 0 {
		t.Fatalf("the uninterrupted run stored work twice: %+v", baseline.d.Duplicates)
	}
	return baseline.d
}

// uninterrupted runs the pipeline of text once in one process and returns
// its digest.
func uninterrupted(text string) (*digest.Digest, error) {
	d, _, _, err := uninterruptedIn(text)
	return d, err
}

// uninterruptedIn is uninterrupted, with the run's data directory and
// configuration (kept until the test binary ends).
func uninterruptedIn(text string) (d *digest.Digest, data, cfg string, err error) {
	dir, err := os.MkdirTemp(filepath.Dir(t1Bin), "baseline-")
	if err != nil {
		return nil, "", "", err
	}
	data, cfg = filepath.Join(dir, "data"), filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		return nil, "", "", err
	}
	run := exec.Command(t1Bin, "run", "--json", "--log-level", "warn", "--data", data, "--config", cfg)
	run.Dir = dir
	if out, err := run.CombinedOutput(); err != nil {
		return nil, "", "", fmt.Errorf("uninterrupted run: %v\n%s", err, out)
	}
	dg := exec.Command(t1Bin, "digest", "--run", "tiny", "--json", "--data", data, "--config", cfg)
	dg.Dir = dir
	out, err := dg.Output()
	if err != nil {
		return nil, "", "", fmt.Errorf("digest: %v\n%s", err, out)
	}
	d = new(digest.Digest)
	if err := json.Unmarshal(out, d); err != nil {
		return nil, "", "", err
	}
	return d, data, cfg, nil
}

// rowsThatDiffer logs, for each table the two digests disagree on, the
// rows (less the wall-clock columns) that one run has and the other has
// not: a digest says that a table differs, these say how.
func rowsThatDiffer(t *testing.T, want, got *digest.Digest, wantData, wantCfg, gotData, gotCfg string) {
	t.Helper()
	for _, line := range want.Diff(got) {
		name, ok := strings.CutPrefix(line, "table ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, ":")
		rows := func(data, cfg string) map[string]bool {
			cmd := command(t, data, cfg, "query", name, "--run", "tiny", "--format", "ndjson")
			out, err := cmd.Output()
			if err != nil {
				t.Logf("query %s: %v", name, err)
				return nil
			}
			set := map[string]bool{}
			for _, r := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var row map[string]any
				if json.Unmarshal([]byte(r), &row) != nil {
					continue
				}
				for _, c := range digest.WallClock() {
					if col, ok := strings.CutPrefix(c, name+"."); ok {
						delete(row, col)
					}
				}
				b, _ := json.Marshal(row)
				set[string(b)] = true
			}
			return set
		}
		w, g := rows(wantData, wantCfg), rows(gotData, gotCfg)
		t.Logf("%s: %d distinct rows uninterrupted, %d resumed", name, len(w), len(g))
		for r := range w {
			if !g[r] {
				t.Logf("%s: only the uninterrupted run has %s", name, r)
			}
		}
		for r := range g {
			if !w[r] {
				t.Logf("%s: only the resumed run has %s", name, r)
			}
		}
	}
}

// killable gives cmd a temporary directory of its own, removed when the
// test ends: a process killed with SIGKILL leaves its sandboxes'
// directories behind. Removal is best effort, since a sandbox process may
// still be dying. Sandboxes run as uids of their own, so the directory
// must be open to them.
func killable(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	dir, err := os.MkdirTemp("", "t1-killed-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	return cmd
}

// background starts cmd and stops it with SIGINT when the test ends; its
// standard error is returned for diagnostics.
func background(t *testing.T, cmd *exec.Cmd) *bytes.Buffer {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return &stderr
}

// infraUp serves data's embedded NATS and S3 from a `t1 infra up` process
// until the test ends.
func infraUp(t *testing.T, data, cfg string) {
	t.Helper()
	up := command(t, data, cfg, "infra", "up")
	background(t, up)
	waitOwner(t, data, up.Process.Pid)
}

// eventWatch follows the run's events in the log of the process serving
// data, counting them by type.
type eventWatch struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	mu     sync.Mutex
	counts map[string]int
	seen   chan struct{} // signalled on every event
}

func watchEvents(t *testing.T, data string) *eventWatch {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(data, "endpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ep struct{ NATS string }
	if err := json.Unmarshal(raw, &ep); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(ep.NATS, nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	w := &eventWatch{nc: nc, js: js, counts: map[string]int{}, seen: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cons jetstream.Consumer
	checkFor(t, 30*time.Second, func() error {
		cons, err = js.OrderedConsumer(ctx, "T1", jetstream.OrderedConsumerConfig{FilterSubjects: []string{engine.Subject("tiny", ">")}})
		return err
	})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		w.mu.Lock()
		w.counts[m.Headers().Get(engine.HeaderType)]++
		w.mu.Unlock()
		select {
		case w.seen <- struct{}{}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return w
}

func (w *eventWatch) count(typ string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[typ]
}

func (w *eventWatch) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.counts))
	for k, v := range w.counts {
		out[k] = v
	}
	return out
}

// await waits until f reports true for the counts seen so far.
func (w *eventWatch) await(t *testing.T, limit time.Duration, what string, f func(*eventWatch) bool) {
	t.Helper()
	deadline := time.After(limit)
	for !f(w) {
		select {
		case <-w.seen:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no %s within %s; events %v", what, limit, w.snapshot())
		}
	}
}

// The tiny pipeline run as one `t1 worker` process per stage, over TCP to
// a `t1 infra up` process, with `t1 run --no-stages` starting and following
// the run, stores exactly what the single-process run stores.
func TestWorkersMatchOneProcess(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	want := baselineDigest(t)
	data, cfg := t.TempDir(), writeConfig(t, equalPipeline)
	infraUp(t, data, cfg)
	for _, s := range pipelineStages {
		background(t, command(t, data, cfg, "worker", "--stage", s))
	}
	completeRun(t, data, cfg, "--no-stages")
	sameDigest(t, want, readDigest(t, data, cfg))
}

// A rollout worker killed with SIGKILL while an attempt plays leaves the
// attempt to a restarted worker, which plays it once: one trajectory for
// the attempt and a run equal to the uninterrupted one.
func TestRolloutWorkerKilledMidEpisode(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	want := baselineDigest(t)
	data, cfg := t.TempDir(), writeConfig(t, equalPipeline)
	infraUp(t, data, cfg)
	for _, s := range pipelineStages {
		if s != "rollout" {
			background(t, command(t, data, cfg, "worker", "--stage", s))
		}
	}
	w := watchEvents(t, data)
	run := command(t, data, cfg, "run", "--no-stages", "--json", "--log-level", "warn")
	background(t, run)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stream, err := w.js.Stream(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	completions := func(p attemptID) int {
		n := 0
		for _, data := range streamEvents(t, stream, engine.Subject("tiny", "rollout.completed")) {
			var c attemptID
			if json.Unmarshal(data, &c) == nil && c == p {
				n++
			}
		}
		return n
	}
	// Kill the worker while the rollout consumer holds a request that has
	// no completion yet: an episode is being played. An attempt can finish
	// between looking and killing; then another worker is killed later.
	var killed []attemptID
	for try := 0; len(killed) == 0; try++ {
		if try == 5 {
			t.Fatal("no kill landed in the middle of an episode in 5 tries")
		}
		worker := killable(t, command(t, data, cfg, "worker", "--stage", "rollout"))
		if err := worker.Start(); err != nil {
			t.Fatal(err)
		}
		var floor, last uint64
		checkFor(t, 3*time.Minute, func() error {
			c, err := stream.Consumer(ctx, "rollout")
			if err != nil {
				return err
			}
			info, err := c.Info(ctx)
			if err != nil {
				return err
			}
			if info.NumAckPending == 0 || info.Delivered.Stream <= info.AckFloor.Stream {
				return fmt.Errorf("no attempt in flight")
			}
			floor, last = info.AckFloor.Stream, info.Delivered.Stream
			return nil
		})
		worker.Process.Signal(syscall.SIGKILL)
		worker.Wait()
		for seq := floor + 1; seq <= last; seq++ {
			m, err := stream.GetMsg(ctx, seq)
			if err != nil || m.Subject != engine.Subject("tiny", "rollout.requested") {
				continue
			}
			var p attemptID
			if err := json.Unmarshal(m.Data, &p); err != nil {
				t.Fatal(err)
			}
			if completions(p) == 0 {
				killed = append(killed, p)
			}
		}
	}
	t.Logf("killed the rollout worker playing %+v", killed)
	background(t, command(t, data, cfg, "worker", "--stage", "rollout"))
	w.await(t, 4*time.Minute, "run.completed", func(w *eventWatch) bool { return w.count("run.completed") > 0 })
	for _, p := range killed {
		if n := completions(p); n != 1 {
			t.Fatalf("%d completions of the attempt %+v its killed worker played, want 1", n, p)
		}
	}
	sameDigest(t, want, readDigest(t, data, cfg))
}

// attemptID is what identifies an attempt in rollout payloads.
type attemptID struct {
	TaskID        string `json:"task_id"`
	Attempt       int    `json:"attempt"`
	Purpose       string `json:"purpose"`
	Iteration     int    `json:"iteration"`
	PolicyVersion int64  `json:"policy_version"`
}

// streamEvents returns the payloads of every event on subject.
func streamEvents(t *testing.T, s jetstream.Stream, subject string) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out [][]byte
	var seq uint64
	for {
		m, err := s.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			return out
		}
		out = append(out, m.Data)
		seq = m.Sequence
	}
}

// crashAndResume runs the pipeline of text with `t1 run`, kills it with
// SIGKILL once the log holds n events of type typ, runs it again to its
// end, and returns the run's digest and the events counted at the kill.
func crashAndResume(t *testing.T, text, typ string, n int) (*digest.Digest, map[string]int) {
	t.Helper()
	return crashAndResumeIn(t, t.TempDir(), writeConfig(t, text), typ, n)
}

// crashAndResumeIn is crashAndResume on data and cfg.
func crashAndResumeIn(t *testing.T, data, cfg, typ string, n int) (*digest.Digest, map[string]int) {
	t.Helper()
	first := killable(t, command(t, data, cfg, "run", "--log-level", "warn"))
	var stderr bytes.Buffer
	first.Stderr = &stderr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	waitOwner(t, data, first.Process.Pid)
	w := watchEvents(t, data)
	name := fmt.Sprintf("%s#%d", typ, n)
	w.await(t, 3*time.Minute, name, func(w *eventWatch) bool {
		return w.count(typ) >= n || w.count("run.completed") > 0
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	w.nc.Close()
	at := w.snapshot()
	if at["run.completed"] > 0 {
		t.Fatalf("the run completed before the crash point: %v\n%s", at, stderr.String())
	}
	left := recordedBy(t, first.Process.Pid)
	completeRun(t, data, cfg)
	requireGone(t, first.Process.Pid, left)
	return readDigest(t, data, cfg), at
}

// crashPoints spread over every phase of the tiny pipeline: `t1 run` is
// killed once the log holds n events of type typ. The default test run
// takes the quick ones, T1_CRASH_POINTS=all takes all.
var crashPoints = []struct {
	typ   string
	n     int
	phase string
	quick bool
}{
	{"run.started", 1, "start", false},
	{"synth.candidate", 2, "synthesis", false},
	{"task.synthesized", 1, "synthesis", false},
	{"task.audited", 1, "audit", true},
	{"pool.sealed", 1, "sealing, baseline eval asked", false},
	{"rollout.completed", 1, "demonstrations", false},
	{"reward.scored", 3, "rewards", false},
	{"sft.requested", 1, "SFT", false},
	{"sft.completed", 1, "training rollouts", false},
	{"batch.ready", 1, "critic", false},
	{"critic.updated", 1, "PPO", true},
	{"policy.updated", 1, "final eval", false},
	{"eval.completed", 1, "eval", false},
}

// An asynchronous run (training.max_staleness 1) killed with SIGKILL while
// iteration 1 plays and iteration 0 trains resumes to the digest of an
// uninterrupted one: which version served which attempt is decided from
// the log, so the restart decides the same, loses no attempt and trains
// none twice, and every batch stays within the bound.
func TestAsyncCrashRestart(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	text := strings.Replace(equalPipeline, "    iterations: 1\n", "    iterations: 3\n", 1)
	text = strings.Replace(text, "training:\n", "training:\n  max_staleness: 1\n", 1)
	want, wantData, wantCfg, err := uninterruptedIn(text)
	if err != nil {
		t.Fatal(err)
	}
	if want.Duplicates.Total() != 0 {
		t.Fatalf("the uninterrupted run stored work twice: %+v", want.Duplicates)
	}
	data, cfg := t.TempDir(), writeConfig(t, text)
	got, at := crashAndResumeIn(t, data, cfg, "critic.updated", 1)
	if at["iteration.started"] < 2 {
		t.Fatalf("killed before iteration 1 started, nothing overlapped: %v", at)
	}
	if want.SHA256 != got.SHA256 {
		rowsThatDiffer(t, want, got, wantData, wantCfg, data, cfg)
	}
	sameDigest(t, want, got)
	t.Logf("killed with %d iterations started, %d batches, %d updates: digest %s", at["iteration.started"], at["batch.ready"], at["policy.updated"], got.SHA256)

	// PPO replayed into a branch trains each stale batch on the policy the
	// run trained it on, and makes the same weights.
	if out, err := finish(t, command(t, data, cfg, "replay", "--stage", "ppo", "--run", "tiny", "--into", "tiny-ppo"), 3*time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The embedded store keeps each object as a file under data/s3/<bucket>.
	weights := func(run string) map[string]string {
		sums := map[string]string{}
		files, _ := filepath.Glob(filepath.Join(data, "s3", "*", "runs", run, "policy", "v*", "model.safetensors"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sums[filepath.Base(filepath.Dir(f))] = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		return sums
	}
	parent, branch := weights("tiny"), weights("tiny-ppo")
	if len(branch) != 3 {
		t.Fatalf("the replay made policies %v, want the 3 updates'", branch)
	}
	for v, sum := range branch {
		if parent[v] != sum {
			t.Errorf("policy %s: the replay's weights differ from the run's", v)
		}
	}
}

// `t1 run` killed with SIGKILL at a point of the run and started again
// ends the run with the digest of an uninterrupted run: no trajectory,
// reward, policy version or event stored twice, nothing lost.
func TestCrashRestartEquivalence(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	want := baselineDigest(t)
	all := os.Getenv("T1_CRASH_POINTS") == "all"
	var results []string
	for _, cp := range crashPoints {
		if !cp.quick && !all {
			continue
		}
		name := fmt.Sprintf("%s#%d", cp.typ, cp.n)
		t.Run(name, func(t *testing.T) {
			t0 := time.Now()
			got, at := crashAndResume(t, equalPipeline, cp.typ, cp.n)
			sameDigest(t, want, got)
			total := 0
			for _, n := range at {
				total += n
			}
			results = append(results, fmt.Sprintf("| %s | %s | %d | equal | %d | %s |", name, cp.phase, total,
				got.Duplicates.Total(), time.Since(t0).Round(time.Second)))
		})
	}
	t.Logf("crash points:\n| killed after | phase | events in the log at the kill | digest | duplicates | kill + restart + digest |\n|---|---|---|---|---|---|\n%s",
		strings.Join(results, "\n"))
}
