package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/policy"
)

// lockedBuffer is a command's output, written from several goroutines (a
// sandbox's two streams, a server's log) while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// servePolicy runs `t1 serve-policy` on a free port until the test ends
// and returns its URL.
func servePolicy(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root := newRoot()
	out := &lockedBuffer{}
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(append([]string{"serve-policy", "--addr", "127.0.0.1:0", "--log-level", "warn"}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	re := regexp.MustCompile(`serving on (http://\S+)`)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if mm := re.FindStringSubmatch(out.String()); mm != nil {
			return mm[1]
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("serve-policy ended: %v\n%s", err, out.String())
		default:
		}
	}
	t.Fatalf("no address printed: %q", out.String())
	return ""
}

func TestServePolicy(t *testing.T) {
	t.Parallel()
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	cfg := moe.DefaultConfig()
	cfg.Context = 128
	m, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := (&moe.Checkpoint{Model: m, Tokenizer: tok}).SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	url := servePolicy(t, "--checkpoint", dir, "--weight-version", "7")
	cl, err := inference.NewSGLang(inference.SGLangOptions{URL: url, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	req := inference.GenerateRequest{InputIDs: tok.Encode("<|user|>pwd<|end|><|assistant|>"),
		SamplingParams: inference.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 24, Seed: 3}, ReturnLogprob: true, ReturnRoutedExperts: true}
	got, err := cl.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want, err := inference.NewReference(m, tok, moe.BF16, "7").Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.WeightVersion != "7" || !slices.Equal(got.OutputIDs, want.OutputIDs) || !slices.Equal(got.OutputTokenLogprobs, want.OutputTokenLogprobs) ||
		!slices.Equal(got.RoutedExperts.Experts, want.RoutedExperts.Experts) {
		t.Fatalf("served generation differs from the checkpoint's: %+v", got)
	}
	// A new policy, loaded without restarting.
	cfg.Seed = 2
	m2, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	if err := (&moe.Checkpoint{Model: m2, Tokenizer: tok}).SaveDir(dir2); err != nil {
		t.Fatal(err)
	}
	if err := cl.UpdateWeightsFromDisk(context.Background(), dir2, "8"); err != nil {
		t.Fatal(err)
	}
	got, err = cl.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want, err = inference.NewReference(m2, tok, moe.BF16, "8").Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.WeightVersion != "8" || !slices.Equal(got.OutputTokenLogprobs, want.OutputTokenLogprobs) {
		t.Fatalf("after the update: version %s", got.WeightVersion)
	}
}

func TestMoEGap(t *testing.T) {
	t.Parallel()
	run := func(prec string) policy.Gap {
		out, err := t1(t, "moe", "gap", "--json", "--prompts", "2", "--max-new-tokens", "48", "--precision", prec, "--sft-steps", "2")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var r policy.Gap
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if r.Report.Generated != 96 || r.Report.ReplayOn.Sets == 0 {
			t.Fatalf("%+v", r.Report)
		}
		return r
	}
	if r := run("bf16"); r.Report.ReplayOn.Mismatches != 0 || r.Report.ReplayOff.MeanAbsLogProbGap == 0 {
		t.Fatalf("bf16: %+v", r.Report)
	}
	if r := run("f32"); r.Report.ReplayOff.Mismatches != 0 || r.Report.ReplayOff.MaxAbsLogProbGap != 0 {
		t.Fatalf("f32: %+v", r.Report)
	}
	if _, err := t1(t, "moe", "gap", "--prompts", "0"); err == nil {
		t.Fatal("--prompts 0 accepted")
	}
}

// `t1 moe init` writes the configured fresh model as a checkpoint
// directory t1 loads back as the same model, and never overwrites one.
func TestMoEInit(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "start")
	if _, err := t1(t, "moe", "init", "--out", dir); err != nil {
		t.Fatal(err)
	}
	ck, err := moe.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := moe.NewModel(moe.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ck.Model.W, want.W) {
		t.Fatal("the checkpoint's weights are not a fresh model of the configured shape")
	}
	if _, err := t1(t, "moe", "init", "--out", dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("a second init over the checkpoint: %v", err)
	}
}
