// Package security_test checks external mode's security: stages work over
// NATS with a password, an nkey, TLS and mutual TLS, wrong credentials are
// refused without the secret, and no credential ever reaches a log line,
// an event or a stored object.
package security_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/s3"
	"github.com/t1pipe/t1/infra/s3/embedded"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/pipelinetest"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/schemas"
)

// The secrets every test of this package plants and then looks for.
const (
	natsUser     = "t1-pipeline"
	natsPassword = "nats-pw-Vb93kQz7Lm"
	s3Access     = "T1ACCESSd8Hq2Zr5"
	s3Secret     = "s3-secret-Jw4nX8pT6cYe1"
	wrongNATS    = "wrong-nats-pw-Ru7e"
	wrongS3      = "wrong-s3-secret-Kd3v"
)

var (
	t1Bin   string
	gw      *embedded.Store
	s3Root  string // the gateway's directory: the bucket's objects as files
	workDir string
)

// TestMain builds t1 and starts an embedded S3 gateway whose credentials
// are the planted secrets (one gateway per process).
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	embedded.Executable = testinfra.Gatewayd
	var err error
	if workDir, err = os.Getwd(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "t1-security-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if !testinfra.Short() {
		if t1Bin, err = testinfra.BuildT1(tmp); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	s3Root = filepath.Join(tmp, "s3")
	creds, _ := json.Marshal(map[string]string{"access_key": s3Access, "secret_key": s3Secret})
	if err := os.WriteFile(embedded.CredentialsPath(s3Root), creds, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if gw, err = embedded.Start(context.Background(), embedded.Options{Dir: s3Root}); err != nil {
		fmt.Fprintln(os.Stderr, "embedded S3:", err)
		return 1
	}
	code := m.Run()
	if err := gw.Close(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// A pipeline in external mode — NATS with a password taken from the
// environment, S3 keys taken from AWS_* — runs `t1 demo`, `t1 tasks
// import`, `t1 status` and `t1 events list` at debug level, and in process
// a rollout and reward of the imported task with JSON logs at debug level;
// connecting with a wrong password and wrong S3 keys fails. Every log
// line and output, every message of every stream and every stored object
// is then searched for the planted secrets: none may appear.
func TestSecretsStayOutOfLogsEventsAndObjects(t *testing.T) {
	testinfra.Long(t)
	if gw.Config().AccessKey != s3Access {
		t.Fatal("the gateway does not use the planted S3 keys")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv := startNATS(t, &server.Options{Username: natsUser, Password: natsPassword})
	url := natsURL(srv, "nats")
	t.Setenv("T1_TEST_NATS_PASSWORD", natsPassword)
	t.Setenv("AWS_ACCESS_KEY_ID", s3Access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3Secret)
	ep := gw.Config()
	cfgText := fmt.Sprintf(`run:
  id: sec
bus:
  mode: external
  external:
    urls: [%s]
    user: %s
    password_env: T1_TEST_NATS_PASSWORD
store:
  mode: external
  bucket: %s
  external:
    endpoint: %s
    region: %s
    secure: false
stages:
  demo:
    count: 20
    payload_bytes: 2000
`, url, natsUser, ep.Bucket, ep.Endpoint, ep.Region)
	cfgFile := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{} // everything any command or stage wrote
	var dataDirs []string   // every data directory a t1 process used
	t1With := func(cfgFile string, wantOK bool, args ...string) {
		t.Helper()
		data := t.TempDir()
		dataDirs = append(dataDirs, data)
		cmd := exec.Command(t1Bin, append(args, "--config", cfgFile, "--data", data, "--log-level", "debug")...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		logs.Write(out)
		if (err == nil) != wantOK {
			t.Fatalf("t1 %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t1 := func(wantOK bool, args ...string) { t.Helper(); t1With(cfgFile, wantOK, args...) }
	t1(true, "demo", "--json")
	// The password inline in the URL, and an embedded store whose owner
	// writes its endpoints (the NATS URL among them) into the data
	// directory.
	inline := filepath.Join(t.TempDir(), "inline.yaml")
	inlineURL := strings.Replace(url, "nats://", "nats://"+natsUser+":"+natsPassword+"@", 1)
	if err := os.WriteFile(inline, []byte("run:\n  id: sec-inline\nbus:\n  mode: external\n  external:\n    urls: ["+inlineURL+"]\nstages:\n  demo:\n    count: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t1With(inline, true, "demo", "--json")
	task := filepath.Join(workDir, "..", "hostile", "testdata", "tasks", "good")
	t1(true, "tasks", "import", "--run", "sec", task)
	t1(true, "status", "--json")
	t1(true, "events", "list", "--run", "sec", "--limit", "1000")
	t.Setenv("T1_TEST_NATS_PASSWORD", wrongNATS)
	t1(false, "status")
	t.Setenv("T1_TEST_NATS_PASSWORD", natsPassword)
	t.Setenv("AWS_SECRET_ACCESS_KEY", wrongS3)
	t1(false, "tasks", "import", "--run", "sec", task)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3Secret)

	// In process, with JSON logs: rollout and reward of the imported task.
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	prev := slog.Default()
	slog.SetDefault(log)
	t.Cleanup(func() { slog.SetDefault(prev) })
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Data = t.TempDir()
	dataDirs = append(dataDirs, cfg.Data)
	in, err := local.Open(ctx, cfg, local.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	log.Info("opened", "store", s3.Config{Endpoint: ep.Endpoint, Bucket: ep.Bucket, AccessKey: s3Access, SecretKey: s3Secret})
	playAttempt(t, ctx, in, task)

	nEvents := scanStreams(t, ctx, in)
	nObjects := scanObjects(t, ctx)
	for _, d := range dataDirs {
		scanFiles(t, d)
	}
	all := logs.Bytes()
	checkNoSecrets(t, "logs and command output", all)
	t.Logf("searched %d bytes of logs, %d stream messages, %d objects", len(all), nEvents, nObjects)
	if nEvents < 40 || nObjects < 20 || len(all) < 1000 {
		t.Fatalf("too little to search: %d bytes of logs, %d messages, %d objects", len(all), nEvents, nObjects)
	}
	if !bytes.Contains(all, []byte("Authorization Violation")) || !bytes.Contains(all, []byte("denied access")) {
		t.Fatalf("the wrong credentials were not refused as such:\n%s", all)
	}
}

// playAttempt runs rollout and reward, wired from in's configuration, on
// in and plays one demonstration of the imported task.
func playAttempt(t *testing.T, ctx context.Context, in *local.Infra, taskDir string) {
	t.Helper()
	tk, err := harbor.Load(taskDir)
	if err != nil {
		t.Fatal(err)
	}
	rc := testinfra.Runner(1)
	rc.Logger = slog.Default()
	pipelinetest.Run(t, in.Config, in.Log, in.Store, rc, []string{"rollout", "reward"})
	ev, err := engine.NewRootEvent("sec", schemas.RolloutRequested, "a0", schemas.RolloutRequestedPayload{
		TaskID: tk.Name, Attempt: 0, Purpose: "sft", Seed: 1, MaxTurns: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Log.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	testinfra.CheckFor(t, 2*time.Minute, func() error {
		if n := testinfra.Count(t, in.Log, "t1.sec."+schemas.RewardScored); n != 1 {
			return fmt.Errorf("attempt not scored (%d failed)", testinfra.Count(t, in.Log, "t1.sec.*.*.failed"))
		}
		return nil
	})
}

func checkNoSecrets(t *testing.T, where string, data []byte) {
	t.Helper()
	for _, s := range []string{natsPassword, s3Access, s3Secret, wrongNATS, wrongS3} {
		if i := bytes.Index(data, []byte(s)); i >= 0 {
			lo, hi := max(0, i-120), min(len(data), i+len(s)+40)
			t.Errorf("%s carries the secret %q: …%s…", where, s, data[lo:hi])
		}
	}
}

// scanStreams searches every message (subject, headers, body) of every
// stream on the server, key-value buckets included. It returns how many
// messages it read.
func scanStreams(t *testing.T, ctx context.Context, in *local.Infra) int {
	t.Helper()
	js := in.Log.JetStream()
	n := 0
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				continue // deleted or purged
			}
			var b bytes.Buffer
			b.WriteString(m.Subject)
			for k, vs := range m.Header {
				b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
			}
			b.Write(m.Data)
			checkNoSecrets(t, fmt.Sprintf("stream %s message %d (%s)", name, seq, m.Subject), b.Bytes())
			n++
		}
	}
	if err := names.Err(); err != nil && err != jetstream.ErrEndOfData {
		t.Fatal(err)
	}
	return n
}

// scanObjects searches every object of the bucket, through S3 and as the
// gateway's files on disk (metadata included). It returns how many objects
// it read.
func scanObjects(t *testing.T, ctx context.Context) int {
	t.Helper()
	st, err := s3.Open(ctx, gw.Config())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for o, err := range st.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		rc, _, err := st.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		checkNoSecrets(t, "object "+o.Key, data)
		n++
	}
	scanFiles(t, filepath.Dir(s3Root))
	return n
}

// scanFiles searches every regular file under root but the gateway's
// credentials file, which holds the S3 keys by design, and the t1 binary.
func scanFiles(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || p == embedded.CredentialsPath(s3Root) || p == t1Bin {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		checkNoSecrets(t, "file "+p, data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// lockedBuffer collects log records written from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes is a copy of everything written so far.
func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
