package inference

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/inference/standin"
	"github.com/t1pipe/t1/moe"
)

// TestSyncedSwapsWeightsPerVersion: one remote engine serves the version
// each holder asks for, loads a version only when no one holds another,
// and a reply from weights swapped behind a holder's back is refused.
func TestSyncedSwapsWeightsPerVersion(t *testing.T) {
	ref, tok := testReference(t)
	models := map[string]*moe.Model{}
	dirs := map[string]string{}
	for _, v := range []string{"1", "2"} {
		cfg := ref.Config()
		cfg.Seed = uint64(40 + len(models))
		m, err := moe.NewModel(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := (&moe.Checkpoint{Model: m, Tokenizer: tok}).SaveDir(dir); err != nil {
			t.Fatal(err)
		}
		models[v], dirs[v] = m, dir
	}
	srv := NewServer(ref, "initial", nil)
	srv.EnableWeightUpdates(func(ctx context.Context, path string) (*moe.Checkpoint, error) {
		return LoadCheckpoint(ctx, path, moe.Config{}, nil)
	})
	url := serveHandler(t, srv)
	cl, err := NewSGLang(SGLangOptions{URL: url, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := NewSynced(cl)
	ctx := context.Background()
	pathOf := func(v string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { return dirs[v], nil }
	}
	req := GenerateRequest{InputIDs: tok.Encode("<|user|>ls<|end|><|assistant|>"), SamplingParams: SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 12, Seed: 4}, ReturnLogprob: true}
	check := func(eng Engine, v string) {
		t.Helper()
		got, err := eng.Generate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		want, err := NewReference(models[v], tok, moe.BF16, v).Generate(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if got.WeightVersion != v || !slices.Equal(got.OutputTokenLogprobs, want.OutputTokenLogprobs) {
			t.Fatalf("version %s: served %s with other log-probs", v, got.WeightVersion)
		}
	}
	e1, release1, err := s.Hold(ctx, "1", pathOf("1"))
	if err != nil {
		t.Fatal(err)
	}
	check(e1, "1")
	// A second holder of the same version shares the loaded weights.
	e1b, release1b, err := s.Hold(ctx, "1", pathOf("1"))
	if err != nil {
		t.Fatal(err)
	}
	check(e1b, "1")
	// Version 2 waits until no one holds version 1.
	got2 := make(chan error, 1)
	var e2 Engine
	var release2 func()
	go func() {
		var err error
		e2, release2, err = s.Hold(ctx, "2", pathOf("2"))
		got2 <- err
	}()
	release1()
	select {
	case err := <-got2:
		t.Fatalf("version 2 loaded while version 1 is held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	check(e1b, "1")
	release1b()
	if err := <-got2; err != nil {
		t.Fatal(err)
	}
	check(e2, "2")
	if s.Loads() != 2 {
		t.Fatalf("%d loads, want 2", s.Loads())
	}
	// A holder whose context ends stops waiting.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, _, err := s.Hold(cctx, "1", pathOf("1")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	// Weights swapped behind the holder's back: the reply is refused.
	if err := cl.UpdateWeightsFromDisk(ctx, dirs["1"], "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := e2.Generate(ctx, req); !errors.Is(err, ErrStaleWeights) || !strings.Contains(err.Error(), `"1"`) {
		t.Fatalf("a reply from version 1 to a holder of version 2: %v", err)
	}
	release2()
	// A failed load leaves no version loaded, so the next holder retries it.
	if _, _, err := s.Hold(ctx, "3", func(context.Context) (string, error) { return t.TempDir(), nil }); err == nil {
		t.Fatal("an empty directory loaded")
	}
	e1, release1, err = s.Hold(ctx, "1", pathOf("1"))
	if err != nil {
		t.Fatal(err)
	}
	check(e1, "1")
	release1()
}

// Probe refuses, before a run starts, an engine that does not answer or
// that was started without what t1 needs, naming the flag; t1's own
// server passes.
func TestProbe(t *testing.T) {
	ref, _ := testReference(t)
	shape := ref.Config()
	if err := Probe(context.Background(), Options{Backend: BackendSGLang, URL: serve(t, ref), Model: shape}); err != nil {
		t.Fatalf("t1 serve-policy: %v", err)
	}
	m, err := moe.NewModel(shape)
	if err != nil {
		t.Fatal(err)
	}
	other := shape
	other.Layers++
	serveStandin := func(h http.Handler) string { return serveHandler(t, h) }
	for name, c := range map[string]struct {
		o    Options
		want string
	}{
		"sglang":                 {Options{Backend: BackendSGLang, URL: serveStandin(standin.NewSGLang(m, standin.SGLangOptions{ReturnRoutedExperts: true})), Model: shape}, ""},
		"vllm":                   {Options{Backend: BackendVLLM, URL: serveStandin(standin.NewVLLM(m, standin.VLLMOptions{ReturnRoutedExperts: true})), Model: shape}, ""},
		"sglang without routing": {Options{Backend: BackendSGLang, URL: serveStandin(standin.NewSGLang(m, standin.SGLangOptions{})), Model: shape}, "--enable-return-routed-experts"},
		"vllm without routing":   {Options{Backend: BackendVLLM, URL: serveStandin(standin.NewVLLM(m, standin.VLLMOptions{})), Model: shape}, "--enable-return-routed-experts"},
		"vllm without dev mode":  {Options{Backend: BackendVLLM, URL: serveStandin(standin.NewVLLM(m, standin.VLLMOptions{ReturnRoutedExperts: true, NoDevMode: true})), Model: shape}, "VLLM_SERVER_DEV_MODE=1"},
		"vllm, another model name": {Options{Backend: BackendVLLM, URL: serveStandin(standin.NewVLLM(m, standin.VLLMOptions{ReturnRoutedExperts: true, ServedModelName: "qwen3"})),
			ServedModel: "qwen", Model: shape}, "The model `qwen` does not exist."},
		"another model": {Options{Backend: BackendSGLang, URL: serveStandin(standin.NewSGLang(m, standin.SGLangOptions{ReturnRoutedExperts: true})), Model: other}, "is it serving inference.checkpoint's model?"},
	} {
		err := Probe(context.Background(), c.o)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.o.URL)) {
			t.Errorf("%s: %v, want an error naming %q and the URL", name, err, c.want)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	err = Probe(context.Background(), Options{Backend: BackendSGLang, URL: closed})
	if err == nil || strings.Count(err.Error(), closed) != 1 || strings.Contains(err.Error(), "\n") {
		t.Fatalf("closed port: %v", err)
	}
	if err := Probe(context.Background(), Options{Backend: BackendReference}); err != nil {
		t.Fatal(err)
	}
}
