package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/bus"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
)

// tinyRun is the whole pipeline at its smallest (as in tests/run_test.go):
// two seed tasks, SFT, one PPO iteration, evaluation before and after.
const tinyRun = `stages:
  control:
    pool_target: 2
    rounds: 1
    seeds: 2
    iterations: 1
    attempts: 1
    max_turns: 2
    sft_steps: 2
  eval:
    tasks: 1
    rounds: 0
    attempts: 1
  rollout:
    max_new_tokens: 24
    context: 512
training:
  warmup:
    steps: 1
engine:
  ack_wait: 10s
  heartbeat: 3s
`

type runSummary struct {
	Status string            `json:"status"`
	Reason string            `json:"reason"`
	Events map[string]uint64 `json:"events"`
	Dead   uint64            `json:"dead_letters"`
}

// binDir holds the t1 command once built; TestMain removes it.
var binDir string

// t1Binary builds the t1 command once per test binary.
var t1Binary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "t1-faults-bin")
	if err != nil {
		return "", err
	}
	binDir = dir
	return testinfra.BuildT1(dir)
})

// pipelineRun is one `t1 run --json` of tinyRun with extra configuration.
type pipelineRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

func startRun(t *testing.T, data, run, extra string) *pipelineRun {
	t.Helper()
	if os.Getenv("T1_FAULT_PIPELINE") == "" {
		t.Skip("the whole pipeline under a fault takes a minute or two; T1_FAULT_PIPELINE=1 runs it")
	}
	testinfra.Bubblewrap(t)
	bin, err := t1Binary()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(cfg, []byte("run:\n  id: "+run+"\n"+extra+tinyRun), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &pipelineRun{cmd: exec.Command(bin, "run", "--json", "--log-level", "warn", "--config", cfg, "--data", data)}
	p.cmd.Dir = t.TempDir()
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// wait waits for the run to exit and returns its summary; it must have
// completed.
func (p *pipelineRun) wait(t *testing.T) runSummary {
	t.Helper()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("t1 run: %v\n%s", err, p.stderr.String())
	}
	var s runSummary
	if err := json.Unmarshal(p.stdout.Bytes(), &s); err != nil || s.Status != "completed" {
		t.Fatalf("t1 run ended %+v (%v)\n%s", s, err, p.stderr.String())
	}
	return s
}

func checkSameEvents(t *testing.T, faulted, clean runSummary) {
	t.Helper()
	if faulted.Dead != 0 || clean.Dead != 0 {
		t.Fatalf("dead letters: %d with the fault, %d without", faulted.Dead, clean.Dead)
	}
	for typ, n := range clean.Events {
		if faulted.Events[typ] != n {
			t.Errorf("%s: %d events with the fault, %d without", typ, faulted.Events[typ], n)
		}
	}
	if len(faulted.Events) != len(clean.Events) {
		t.Errorf("event types with the fault %v, without %v", faulted.Events, clean.Events)
	}
	t.Logf("%d event types, equal; %d rollouts, %d scored", len(clean.Events), faulted.Events[schemas.RolloutCompleted], faulted.Events[schemas.RewardScored])
}

// `t1 run` of the whole pipeline against an embedded nats-server in the
// test process (bus.mode external), which is shut down once the first
// rollout is requested and started again on the same port and store
// directory: the run completes with the same events as a run without the
// restart. About 75 s; T1_FAULT_PIPELINE=1 runs it.
func TestNATSRestartWholePipeline(t *testing.T) {
	testinfra.Long(t)
	if os.Getenv("T1_FAULT_PIPELINE") == "" {
		t.Skip("the whole pipeline under a NATS restart takes about 75 s; T1_FAULT_PIPELINE=1 runs it")
	}
	dir := t.TempDir()
	srv, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown() })
	u, _ := url.Parse(srv.ClientURL())
	port, _ := strconv.Atoi(u.Port())
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	nc, err := bus.Connect(ctx, bus.ConnectOptions{URLs: []string{srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := engine.OpenLog(ctx, nc, engine.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	busCfg := "bus:\n  mode: external\n  external:\n    urls: [" + srv.ClientURL() + "]\n"
	clean := startRun(t, data, "clean", busCfg).wait(t)
	faulted := startRun(t, data, "restart", busCfg)
	testinfra.CheckFor(t, 3*time.Minute, func() error {
		if n := count(l, "t1.restart."+schemas.RolloutRequested); n < 1 {
			return fmt.Errorf("no rollout requested yet (%d events)", count(l, "t1.restart.>"))
		}
		return nil
	})
	t.Logf("fault injected after %d events", count(l, "t1.restart.>"))
	srv.Shutdown()
	checkDisconnected(t, nc)
	time.Sleep(natsOutage)
	if srv, err = bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: dir, Port: port}); err != nil {
		t.Fatal(err)
	}
	checkSameEvents(t, faulted.wait(t), clean)
}

// outageAt lists the events after which TestS3OutagesWholePipeline takes
// the store away for s3Outage, each once: the outages then meet synthesis
// and audit, SFT saving its checkpoint, the critic reading the batch, PPO,
// and the final evaluation.
var outageAt = []string{schemas.TaskSynthesized, schemas.SFTRequested, schemas.BatchReady, schemas.CriticUpdated, schemas.PolicyUpdated}

// `t1 run` of the whole pipeline with its object store (store.mode
// external) behind the fault proxy and its bus on a server in the test
// (bus.mode external), so the test can follow the run: after each event
// of outageAt the store is unreachable for s3Outage. The run completes
// with the same events as a run without the outages. T1_FAULT_PIPELINE=1
// runs it.
func TestS3OutagesWholePipeline(t *testing.T) {
	testinfra.Long(t)
	sc := testinfra.StoreConfig(t)
	px := startProxy(t, sc.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", sc.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", sc.SecretKey)
	srv, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	nc, err := bus.Connect(ctx, bus.ConnectOptions{URLs: []string{srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := engine.OpenLog(ctx, nc, engine.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf("bus:\n  mode: external\n  external:\n    urls: [%s]\n"+
		"store:\n  mode: external\n  bucket: %s\n  external:\n    endpoint: %s\n    region: %s\n    secure: false\n    prefix: %s\n",
		srv.ClientURL(), sc.Bucket, px.addr, sc.Region, sc.Prefix)
	data := t.TempDir()
	clean := startRun(t, data, "clean", extra).wait(t)
	faulted := startRun(t, data, "outages", extra)
	exited := make(chan struct{})
	var waitErr error
	go func() {
		defer close(exited)
		waitErr = faulted.cmd.Wait()
	}()
	var hit []string
	for _, typ := range outageAt {
		seen := false
		for !seen {
			select {
			case <-exited:
				t.Fatalf("t1 run ended before %s (exit: %v)\n%s", typ, waitErr, faulted.stderr.String())
			case <-time.After(50 * time.Millisecond):
			}
			seen = count(l, "t1.outages."+typ) > 0
		}
		px.down()
		time.Sleep(s3Outage)
		px.up(t)
		hit = append(hit, typ)
	}
	select {
	case <-exited:
	case <-time.After(6 * time.Minute):
		_ = faulted.cmd.Process.Kill()
		<-exited
		t.Fatalf("t1 run did not finish after outages at %v\n%s", hit, faulted.stderr.String())
	}
	t.Logf("outages of %s after %v; %d handler failures retried", s3Outage, hit, strings.Count(faulted.stderr.String(), "will retry"))
	var s runSummary
	if err := json.Unmarshal(faulted.stdout.Bytes(), &s); err != nil || s.Status != "completed" {
		t.Fatalf("t1 run ended %+v (%v, exit: %v)\n%s", s, err, waitErr, faulted.stderr.String())
	}
	checkSameEvents(t, s, clean)
}
