package inference_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/infra/inference/inferencetest"
	"github.com/t1pipe/t1/infra/inference/standin"
	"github.com/t1pipe/t1/moe"
)

func conformanceModel(t *testing.T) (*moe.Model, *moe.Tokenizer, inferencetest.Model) {
	t.Helper()
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	cfg := moe.DefaultConfig()
	cfg.Context = 256
	m, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := moe.NewChat(tok)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := c.Render([]moe.Message{{Role: moe.RoleUser, Content: "List the files in /tmp."}})
	if err != nil {
		t.Fatal(err)
	}
	return m, tok, inferencetest.Model{Vocab: cfg.Vocab, Layers: cfg.Layers, TopK: cfg.TopK, Experts: cfg.Experts,
		Prompt: prompt, Deterministic: true, Routing: true}
}

func TestConformanceReference(t *testing.T) {
	m, tok, spec := conformanceModel(t)
	inferencetest.Run(t, inference.NewReference(m, tok, moe.BF16, "1"), spec)
}

// TestConformanceSGLangClient runs the SGLang client against t1's server
// over loopback.
func TestConformanceSGLangClient(t *testing.T) {
	m, tok, spec := conformanceModel(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrc, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- inference.ListenAndServe(ctx, "127.0.0.1:0", inference.NewServer(inference.NewReference(m, tok, moe.BF16, "1"), "conformance", nil),
			func(a string) { addrc <- a })
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	cl, err := inference.NewSGLang(inference.SGLangOptions{URL: "http://" + <-addrc, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	inferencetest.Run(t, cl, spec)
}

// TestConformanceExternalSGLang runs the suite against a real SGLang server
// when T1_TEST_SGLANG_URL is set, with the model described by
// T1_TEST_SGLANG_{VOCAB,LAYERS,TOPK,EXPERTS}; the prompt is token ids 1..8.
func TestConformanceExternalSGLang(t *testing.T) {
	url := os.Getenv("T1_TEST_SGLANG_URL")
	if url == "" {
		t.Skip("T1_TEST_SGLANG_URL not set")
	}
	env := func(k string) int {
		v, err := strconv.Atoi(os.Getenv(k))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return v
	}
	spec := inferencetest.Model{Vocab: env("T1_TEST_SGLANG_VOCAB"), Layers: env("T1_TEST_SGLANG_LAYERS"), TopK: env("T1_TEST_SGLANG_TOPK"),
		Experts: env("T1_TEST_SGLANG_EXPERTS"), Prompt: []int{1, 2, 3, 4, 5, 6, 7, 8}, Routing: true}
	cl, err := inference.NewSGLang(inference.SGLangOptions{URL: url, Timeout: 5 * time.Minute, Layers: spec.Layers, TopK: spec.TopK})
	if err != nil {
		t.Fatal(err)
	}
	inferencetest.Run(t, cl, spec)
}

// serveStandin serves h over loopback for the test's lifetime.
func serveStandin(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestConformanceSGLangStandin runs the SGLang client against a stand-in
// as strict as SGLang 0.5.23 (no routing shape, experts in router order,
// unknown sampling_params keys rejected).
func TestConformanceSGLangStandin(t *testing.T) {
	m, _, spec := conformanceModel(t)
	url := serveStandin(t, standin.NewSGLang(m, standin.SGLangOptions{ReturnRoutedExperts: true, Deterministic: true}))
	cl, err := inference.NewSGLang(inference.SGLangOptions{URL: url, Timeout: time.Minute, Layers: spec.Layers, TopK: spec.TopK})
	if err != nil {
		t.Fatal(err)
	}
	inferencetest.Run(t, cl, spec)
}

// TestConformanceVLLMStandin runs the vLLM client against stand-ins of
// vLLM 0.21.0 (routing as nested lists) and 0.34.0 (routing as .npy).
func TestConformanceVLLMStandin(t *testing.T) {
	for _, v := range []string{standin.VLLM021, standin.VLLM034} {
		t.Run(v, func(t *testing.T) {
			m, _, spec := conformanceModel(t)
			url := serveStandin(t, standin.NewVLLM(m, standin.VLLMOptions{Version: v, ReturnRoutedExperts: true, LogprobsMode: "processed_logprobs"}))
			cl, err := inference.NewVLLM(inference.VLLMOptions{URL: url, Model: "standin", Timeout: time.Minute, Layers: spec.Layers, TopK: spec.TopK})
			if err != nil {
				t.Fatal(err)
			}
			inferencetest.Run(t, cl, spec)
		})
	}
}
