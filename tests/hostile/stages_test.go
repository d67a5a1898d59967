package hostile_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/pipelinetest"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

const run = "hostile"

// Outcomes an input may have.
const (
	scored   = "scored"   // reward.scored from a per-assertion report
	fallback = "fallback" // reward.scored from the exit code, the report's problems logged
	unsolved = "unsolved" // reward.scored by the fallback, reward 0
)

// stageInput is one rollout.requested, with what its task's bundle holds.
type stageInput struct {
	name string
	// bundle is stored as the task's bundle; nil with task empty stores
	// nothing.
	bundle []byte
	// task, when set, is a task directory bundled with trial.PutBundle.
	task string
	// payload replaces the request's JSON payload.
	payload []byte
	// bare publishes the payload without the event envelope headers.
	bare bool
	// completed, when set, is published as a rollout.completed for the
	// reward stage instead of a request.
	completed *schemas.RolloutCompletedPayload
	// want is scored, fallback, or a substring of the failure reason.
	want string
}

func (in stageInput) taskID() string { return "h-" + in.name }

// Every hostile input through the rollout and reward stages on a real log
// and store, between good ones: crafted bundles (traversal, links, devices,
// bombs, garbage), garbage verifier reports, non-UTF-8 commands and
// outputs, malformed events. Each fails its event with a clear reason or,
// for a verifier's own garbage, is scored by the fallback with the
// problems logged; the good attempts are all scored; nothing is
// dead-lettered; `t1 status` counts the failures.
func TestHostileInputsThroughStages(t *testing.T) {
	testinfra.Long(t)
	conf := pipelinetest.Config(t)
	logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st := testinfra.Store(t)
	l := testinfra.Log(t)

	good, err := harbor.Load(corpus("good"))
	if err != nil {
		t.Fatal(err)
	}
	goodBundle, _, err := good.BundleBytes()
	if err != nil {
		t.Fatal(err)
	}
	// The snapshot of a tampered attempt: the good bundle, announced with
	// another hash.
	tampered := keys.Snapshot(run, keys.Attempt{Purpose: "sft", Task: "h-snapshot-tampered", Attempt: 91})
	verifierTask := func(script string) string {
		d := copyTask(t)
		if err := os.WriteFile(filepath.Join(d, "tests", "test.sh"), []byte("#!/bin/bash\nmkdir -p /logs/verifier\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	solvedOr1 := "\n[ \"$(cat /app/out.txt)\" = hello ]\n"
	inputs := []stageInput{
		{name: "good-1", task: corpus("good"), want: fallback}, // reward.txt: a reward file, no assertions
		{name: "traversal", bundle: craft(t, goodFiles(t), entry{name: "../escape.txt", data: "x"}), want: "leaves"},
		{name: "absolute-path", bundle: craft(t, goodFiles(t), entry{name: "/etc/cron.d/t1", data: "x"}), want: "absolute"},
		{name: "link-escape", bundle: craft(t, goodFiles(t), entry{name: "environment/up", link: "../../.."}), want: "outside"},
		{name: "write-through-link", bundle: craft(t, goodFiles(t), entry{name: "environment/etc", link: "/etc"}, entry{name: "environment/etc/t1", data: "x"}), want: "link"},
		{name: "hard-link", bundle: craft(t, goodFiles(t), entry{name: "environment/passwd", hard: "/etc/passwd"}), want: "hard link"},
		{name: "device", bundle: craft(t, goodFiles(t), entry{name: "environment/null", device: true}), want: "device"},
		{name: "not-gzip", bundle: []byte("\xff\xfe this is not an archive \x00\x01"), want: "bundle"},
		{name: "truncated", bundle: goodBundle[:len(goodBundle)/2], want: "bundle"},
		{name: "bomb", bundle: bomb(t, 200<<20), want: "limit"},
		{name: "bad-toml", bundle: craft(t, replace(goodFiles(t), "task.toml", "[metadata\n")), want: "task.toml"},
		{name: "non-utf8-instruction", bundle: craft(t, replace(goodFiles(t), "instruction.md", "caf\xe9\n")), want: "UTF-8"},
		{name: "non-utf8-file-name", bundle: craft(t, goodFiles(t), entry{name: "environment/\xff\xfe", data: "x"}), want: "UTF-8"},
		{name: "missing-bundle", want: "not found"},
		{name: "payload-not-json", task: corpus("good"), payload: []byte("\xff\xfe{not json"), want: "payload"},
		{name: "payload-wrong-types", task: corpus("good"), payload: []byte(`{"task_id": 5, "attempt": "one"}`), want: "payload"},
		{name: "payload-non-utf8-task", payload: []byte("{\"task_id\": \"h-\xff\xfe\", \"attempt\": 0, \"purpose\": \"sft\"}"), want: "not found"},
		{name: "bare-message", task: corpus("good"), bare: true, want: "malformed event envelope"},
		{name: "ctrf-garbage", task: verifierTask(`printf '{"results": {"tests": [' > /logs/verifier/ctrf.json` + solvedOr1), want: fallback},
		{name: "junit-garbage", task: verifierTask(`printf '<testsuites><testsuite name="x"><testcase' > /logs/verifier/junit.xml` + solvedOr1), want: fallback},
		{name: "reward-json-garbage", task: verifierTask(`echo '{"reward": "lots", "x": [1, 2' > /logs/verifier/reward.json` + solvedOr1), want: fallback},
		{name: "reward-txt-nan", task: verifierTask(`echo NaN > /logs/verifier/reward.txt` + solvedOr1), want: fallback},
		{name: "report-huge", task: verifierTask(`head -c 40000000 /dev/zero | tr '\0' x > /logs/verifier/ctrf.json` + solvedOr1), want: fallback},
		{name: "report-non-utf8", task: verifierTask(`printf '\xff\xfe garbage on stdout\n'
printf '{"results": {"tool": {"name": "t"}, "summary": {"tests": 1, "passed": 1}, "tests": [{"name": "caf\xe9 \xff", "status": "passed"}]}}' > /logs/verifier/ctrf.json` + solvedOr1), want: scored},
		{name: "solution-non-utf8", task: nonUTF8Solution(t), want: fallback},
		{name: "solution-huge-output", task: withFile(t, copyTask(t), "solution/solve.sh",
			"#!/bin/bash\nhead -c 50000000 /dev/zero | tr '\\0' 'y'\necho hello > /app/out.txt\n"), want: fallback},
		{name: "verifier-hangs", task: withFile(t, verifierTask("sleep 300\n"), "task.toml",
			"version = \"1.0\"\n\n[metadata]\ndifficulty = \"easy\"\ncategory = \"file-operations\"\n\n[verifier]\ntimeout_sec = 2.0\n"), want: unsolved},
		{name: "snapshot-missing", task: corpus("good"), want: "not found", completed: &schemas.RolloutCompletedPayload{
			TaskID: "h-snapshot-missing", Attempt: 90, Purpose: "sft", Snapshot: schemas.ObjectRef{Key: keys.Snapshot(run, keys.Attempt{Purpose: "sft", Task: "h-snapshot-missing", Attempt: 90})}}},
		{name: "snapshot-tampered", task: corpus("good"), want: "sha256", completed: &schemas.RolloutCompletedPayload{
			TaskID: "h-snapshot-tampered", Attempt: 91, Purpose: "sft", Snapshot: schemas.ObjectRef{Key: tampered,
				Bytes: int64(len(goodBundle)), SHA256: strings.Repeat("0", 64)}}},
		{name: "good-2", task: corpus("good"), want: fallback},
	}
	if _, err := st.Put(ctx, tampered, bytes.NewReader(goodBundle), int64(len(goodBundle)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	pipelinetest.Run(t, conf, l, st, testinfra.Runner(2), []string{"rollout", "reward"})

	// An event over the server's payload limit is refused at publish with
	// both sizes, and nothing is stored.
	huge, err := engine.NewRootEvent(run, schemas.RolloutRequested, "huge", map[string]string{"task_id": strings.Repeat("x", 9<<20)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, huge); err == nil || !strings.Contains(err.Error(), "over the server's limit") {
		t.Fatalf("publishing a 9 MiB event: %v", err)
	}

	ids := map[string]string{} // event id → input
	for i, in := range inputs {
		switch {
		case in.task != "":
			tk, err := harbor.Load(in.task)
			if err != nil {
				t.Fatalf("%s: %v", in.name, err)
			}
			if _, _, _, err := trial.PutBundle(ctx, st, run, in.taskID(), tk); err != nil {
				t.Fatal(err)
			}
		case in.bundle != nil:
			if _, err := st.Put(ctx, keys.Bundle(run, in.taskID()), bytes.NewReader(in.bundle), int64(len(in.bundle)), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		ev, err := engine.NewRootEvent(run, schemas.RolloutRequested, in.name, schemas.RolloutRequestedPayload{
			TaskID: in.taskID(), Attempt: i, Purpose: "sft", Seed: uint64(i), MaxTurns: 8,
		})
		if in.completed != nil {
			ev, err = engine.NewRootEvent(run, schemas.RolloutCompleted, in.name, in.completed)
		}
		if err != nil {
			t.Fatal(err)
		}
		if in.payload != nil {
			ev.Payload = in.payload
		}
		if in.bare {
			if _, err := l.JetStream().PublishMsg(ctx, &nats.Msg{Subject: ev.Subject(), Data: ev.Payload}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		ids[ev.ID] = in.name
		if _, err := l.Publish(ctx, ev); err != nil {
			t.Fatalf("%s: %v", in.name, err)
		}
	}

	wantScored, wantFailed := 0, 0
	for _, in := range inputs {
		if in.want == scored || in.want == fallback || in.want == unsolved {
			wantScored++
		} else {
			wantFailed++
		}
	}
	testinfra.CheckFor(t, 4*time.Minute, func() error {
		s, f := testinfra.Count(t, l, "t1."+run+"."+schemas.RewardScored), testinfra.Count(t, l, "t1."+run+".*.*.failed")
		if s != wantScored || f != wantFailed {
			return fmt.Errorf("%d of %d scored, %d of %d failed", s, wantScored, f, wantFailed)
		}
		return nil
	})

	failures := map[string]engine.Failure{}
	for _, ev := range testinfra.Events(t, l, "t1."+run+".*.*.failed") {
		var f engine.Failure
		if err := ev.Decode(&f); err != nil {
			t.Fatal(err)
		}
		name, ok := ids[f.EventID]
		if !ok && strings.HasPrefix(f.EventID, "seq-") {
			name = "bare-message"
		}
		failures[name] = f
	}
	scores := map[string]schemas.RewardScoredPayload{}
	for _, ev := range testinfra.Events(t, l, "t1."+run+"."+schemas.RewardScored) {
		var p schemas.RewardScoredPayload
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		scores[strings.TrimPrefix(p.TaskID, "h-")] = p
	}
	for _, in := range inputs {
		f, failed := failures[in.name]
		s, ok := scores[in.name]
		switch in.want {
		case scored, fallback, unsolved:
			if failed || !ok {
				t.Errorf("%s: not scored (failure %+v)", in.name, f)
				continue
			}
			t.Logf("%s: scored %g from %s (%d/%d), fallback %t", in.name, s.Reward, s.Source, s.Passed, s.Total, s.Fallback)
			if s.Fallback != (in.want != scored) || (s.Reward > 0) != (in.want != unsolved) {
				t.Errorf("%s: %+v, want %s", in.name, s, in.want)
			}
		default:
			if !failed || ok {
				t.Errorf("%s: not failed (scored %+v)", in.name, s)
				continue
			}
			t.Logf("%s: %s failed in %s: %s", in.name, f.Type, f.Stage, f.Reason)
			typ := schemas.RolloutRequested
			if in.completed != nil {
				typ = schemas.RolloutCompleted
			}
			if f.Type != typ || !strings.Contains(f.Reason, in.want) || strings.Contains(f.Reason, "\n") {
				t.Errorf("%s: failure %+v, want a one-line %s failure mentioning %q", in.name, f, typ, in.want)
			}
		}
	}
	for _, name := range []string{"ctrf-garbage", "junit-garbage", "reward-json-garbage", "reward-txt-nan", "report-huge"} {
		if !strings.Contains(logs.String(), "task=h-"+name) {
			t.Errorf("%s: no verifier report problems logged", name)
		}
	}

	// t1 status, pointed at the same server, counts the failures by type.
	cfg := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(cfg, []byte("bus:\n  mode: external\n  external:\n    urls: ["+l.JetStream().Conn().ConnectedUrl()+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(t1Bin, "status", "--json", "--config", cfg, "--data", t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("t1 status: %v\n%s", err, out)
	}
	var status struct {
		Failed []struct {
			Run, Type string
			Count     int
		} `json:"failed"`
		DeadLetters []json.RawMessage `json:"dead_letters"`
	}
	if err := json.Unmarshal(out, &status); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]int{}
	for _, f := range status.Failed {
		if f.Run == run {
			got[f.Type] += f.Count
		}
	}
	if got[schemas.RolloutCompleted] != 2 || got[schemas.RolloutRequested] != wantFailed-2 || len(got) != 2 || len(status.DeadLetters) != 0 {
		t.Fatalf("t1 status: failed %+v (want %d %s, 2 %s), dead letters %s", status.Failed, wantFailed-2, schemas.RolloutRequested,
			schemas.RolloutCompleted, status.DeadLetters)
	}
}

// withFile overwrites one file of the task directory dir.
func withFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// nonUTF8Solution is the good task whose solution runs commands with
// bytes that are not UTF-8 and prints them back.
func nonUTF8Solution(t *testing.T) string {
	d := copyTask(t)
	script := "#!/bin/bash\nprintf 'caf\xe9 \xff\xfe\\n' > /app/latin1.txt\ncat /app/latin1.txt\necho \xff\xfe-arg\necho hello > /app/out.txt\n"
	if err := os.WriteFile(filepath.Join(d, "solution", "solve.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// entry is one crafted archive member.
type entry struct {
	name, data string
	link, hard string
	device     bool
}

// goodFiles is the good task as archive members.
func goodFiles(t *testing.T) []entry {
	t.Helper()
	var out []entry
	for _, p := range []string{"instruction.md", "task.toml", "tests/test.sh", "solution/solve.sh"} {
		data, err := os.ReadFile(filepath.Join(corpus("good"), p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{name: p, data: string(data)})
	}
	return out
}

func replace(es []entry, name, data string) []entry {
	for i := range es {
		if es[i].name == name {
			es[i].data = data
		}
	}
	return es
}

// craft writes members into a gzip-compressed tar, in order, unchecked.
func craft(t *testing.T, base []entry, extra ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range append(base, extra...) {
		hdr := &tar.Header{Name: e.name, Mode: 0o755, Size: int64(len(e.data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		switch {
		case e.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeSymlink, e.link, 0
		case e.hard != "":
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, e.hard, 0
		case e.device:
			hdr.Typeflag, hdr.Devmajor, hdr.Devminor, hdr.Size = tar.TypeChar, 1, 3, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := io.WriteString(tw, e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bomb is the good task plus one file of size zero bytes: tiny
// compressed, far over every limit expanded.
func bomb(t *testing.T, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	for _, e := range goodFiles(t) {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o755, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.data)
	}
	if err := tw.WriteHeader(&tar.Header{Name: "environment/zeros", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 1<<20)
	for n := int64(0); n < size; n += int64(len(zero)) {
		if _, err := tw.Write(zero); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// captureLogs copies the default logger's records into a buffer for the
// rest of the test.
func captureLogs(t *testing.T) *syncBuffer {
	buf := &syncBuffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.MultiWriter(os.Stderr, buf), &slog.HandlerOptions{Level: slog.LevelWarn})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return buf
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
