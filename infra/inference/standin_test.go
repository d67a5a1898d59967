package inference_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/infra/inference/standin"
	"github.com/t1pipe/t1/moe"
)

// bigSeed is a per-episode seed hash above int64's range.
const bigSeed = uint64(1)<<63 + 12345

func standinModel(t *testing.T) *moe.Model {
	t.Helper()
	cfg := moe.DefaultConfig()
	cfg.Context = 256
	m, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func standinPrompt() []int { return []int{1, 2, 3, 4, 5, 6, 7, 8} }

// reference is what t1's own engine samples at f32 for req.
func reference(t *testing.T, m *moe.Model, req inference.GenerateRequest) *inference.GenerateResponse {
	t.Helper()
	r, err := inference.NewReference(m, nil, moe.F32, "x").Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func vllmClient(t *testing.T, url string, mode string) *inference.VLLM {
	t.Helper()
	cfg := moe.DefaultConfig()
	cl, err := inference.NewVLLM(inference.VLLMOptions{URL: url, Model: "standin", Timeout: time.Minute, LoadTimeout: time.Minute,
		LogprobsMode: mode, Layers: cfg.Layers, TopK: cfg.TopK})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func sglangClient(t *testing.T, url string) *inference.SGLang {
	t.Helper()
	cfg := moe.DefaultConfig()
	cl, err := inference.NewSGLang(inference.SGLangOptions{URL: url, Timeout: time.Minute, LoadTimeout: time.Minute, Layers: cfg.Layers, TopK: cfg.TopK})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestVLLMSeedWithinInt64: vLLM bounds seed to int64 (400 above); a seed
// hash above 2**63-1 must still be served.
func TestVLLMSeedWithinInt64(t *testing.T) {
	m := standinModel(t)
	cl := vllmClient(t, serveStandin(t, standin.NewVLLM(m, standin.VLLMOptions{Version: standin.VLLM034})), "")
	req := inference.GenerateRequest{InputIDs: standinPrompt(), SamplingParams: inference.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 4, Seed: bigSeed}}
	if _, err := cl.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// TestSGLangSeedWithinInt64: SGLang's sampling_seed is bounded to int64
// too, and only sampling_seed is known inside sampling_params.
func TestSGLangSeedWithinInt64(t *testing.T) {
	m := standinModel(t)
	cl := sglangClient(t, serveStandin(t, standin.NewSGLang(m, standin.SGLangOptions{Deterministic: true})))
	req := inference.GenerateRequest{InputIDs: standinPrompt(), SamplingParams: inference.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 4, Seed: bigSeed}}
	if _, err := cl.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteRoutingIsTheModels: both clients decode every server's routing
// encoding into the model's routing, each set ascending.
func TestRemoteRoutingIsTheModels(t *testing.T) {
	m := standinModel(t)
	req := inference.GenerateRequest{InputIDs: standinPrompt(), ReturnLogprob: true, ReturnRoutedExperts: true,
		SamplingParams: inference.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 12, Seed: 5}}
	want := reference(t, m, req)
	engines := map[string]inference.Engine{
		"sglang-0.5.23": sglangClient(t, serveStandin(t, standin.NewSGLang(m, standin.SGLangOptions{ReturnRoutedExperts: true, Deterministic: true}))),
	}
	for _, v := range []string{standin.VLLM021, standin.VLLM034} {
		engines["vllm-"+v] = vllmClient(t, serveStandin(t, standin.NewVLLM(m, standin.VLLMOptions{Version: v, ReturnRoutedExperts: true})), "")
	}
	for name, eng := range engines {
		t.Run(name, func(t *testing.T) {
			got, err := eng.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.OutputIDs, want.OutputIDs) {
				t.Fatalf("output %v, want %v", got.OutputIDs, want.OutputIDs)
			}
			if got.RoutedExperts == nil {
				t.Fatalf("no routing: %s", got.RoutingUnavailable)
			}
			r, w := *got.RoutedExperts, *want.RoutedExperts
			if r.Tokens != w.Tokens || r.Layers != w.Layers || r.TopK != w.TopK || !slices.Equal(r.Experts, w.Experts) {
				t.Fatalf("routing [%d %d %d] %v, want [%d %d %d] %v", r.Tokens, r.Layers, r.TopK, r.Experts[:8], w.Tokens, w.Layers, w.TopK, w.Experts[:8])
			}
		})
	}
}

// TestVLLMLogprobsMode: vLLM's default raw_logprobs are before
// temperature; the client refuses temperature ≠ 1 unless the server runs
// processed_logprobs, whose values are the sampled distribution's.
func TestVLLMLogprobsMode(t *testing.T) {
	m := standinModel(t)
	req := inference.GenerateRequest{InputIDs: standinPrompt(), ReturnLogprob: true,
		SamplingParams: inference.SamplingParams{Temperature: 0.7, TopP: 1, MaxNewTokens: 8, Seed: 3}}
	want := reference(t, m, req)
	raw := vllmClient(t, serveStandin(t, standin.NewVLLM(m, standin.VLLMOptions{Version: standin.VLLM034})), "")
	if got, err := raw.Generate(context.Background(), req); !errors.Is(err, inference.ErrBadRequest) {
		t.Fatalf("raw_logprobs at temperature 0.7: %v, log-probs %v; want a refusal", err, got)
	}
	proc := vllmClient(t, serveStandin(t, standin.NewVLLM(m, standin.VLLMOptions{Version: standin.VLLM034, LogprobsMode: "processed_logprobs"})), "processed_logprobs")
	got, err := proc.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.OutputTokenLogprobs, want.OutputTokenLogprobs) {
		t.Fatalf("log-probs %v, want %v", got.OutputTokenLogprobs, want.OutputTokenLogprobs)
	}
}

// TestVLLMReloadResetsPrefixCache: /collective_rpc answers an empty 200,
// and the client resets the prefix cache after reload_weights.
func TestVLLMReloadResetsPrefixCache(t *testing.T) {
	for _, v := range []string{standin.VLLM021, standin.VLLM034} {
		t.Run(v, func(t *testing.T) {
			m := standinModel(t)
			srv := standin.NewVLLM(m, standin.VLLMOptions{Version: v, Load: func(string) (*moe.Model, error) { return m, nil }})
			cl := vllmClient(t, serveStandin(t, srv), "")
			if err := cl.LoadWeights(context.Background(), "/ckpt/v1", "1"); err != nil {
				t.Fatal(err)
			}
			if srv.Reloads() != 1 || srv.Resets() != 1 || srv.CacheStale() {
				t.Fatalf("%d reloads, %d resets, stale cache %v", srv.Reloads(), srv.Resets(), srv.CacheStale())
			}
		})
	}
}

// TestVLLMVersionChecked: a server older than 0.21 is refused, naming its
// version.
func TestVLLMVersionChecked(t *testing.T) {
	m := standinModel(t)
	cl := vllmClient(t, serveStandin(t, standin.NewVLLM(m, standin.VLLMOptions{Version: "0.20.2"})), "")
	req := inference.GenerateRequest{InputIDs: standinPrompt(), SamplingParams: inference.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 2}}
	if _, err := cl.Generate(context.Background(), req); err == nil || !strings.Contains(err.Error(), "0.20.2") {
		t.Fatalf("vLLM 0.20.2: %v, want a refusal naming the version", err)
	}
	cl = vllmClient(t, serveStandin(t, standin.NewVLLM(m, standin.VLLMOptions{Version: standin.VLLM021})), "")
	if v, err := cl.ServerVersion(context.Background()); err != nil || v != standin.VLLM021 {
		t.Fatalf("version %q, %v", v, err)
	}
}

// TestSyncedReloadsAfterRestart: after an engine restart SGLang reads
// weight version "default"; the held version is loaded again and the
// episode carries on.
func TestSyncedReloadsAfterRestart(t *testing.T) {
	m := standinModel(t)
	srv := standin.NewSGLang(m, standin.SGLangOptions{Load: func(string) (*moe.Model, error) { return m, nil }})
	s := inference.NewSynced(sglangClient(t, serveStandin(t, srv)))
	ctx := context.Background()
	eng, release, err := s.Hold(ctx, "1", func(context.Context) (string, error) { return "/ckpt/v1", nil })
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	req := inference.GenerateRequest{InputIDs: standinPrompt(), SamplingParams: inference.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 2}}
	if _, err := eng.Generate(ctx, req); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	r, err := eng.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.WeightVersion != "1" || srv.WeightVersion() != "1" || srv.Loads() != 2 || s.Loads() != 2 {
		t.Fatalf("after a restart: reply version %q, server %q, %d server loads, %d Synced loads", r.WeightVersion, srv.WeightVersion(), srv.Loads(), s.Loads())
	}
}

// TestSGLangLoadTimeout: a weight load may take longer than a generate
// request; it has its own timeout.
func TestSGLangLoadTimeout(t *testing.T) {
	m := standinModel(t)
	srv := standin.NewSGLang(m, standin.SGLangOptions{Load: func(string) (*moe.Model, error) {
		time.Sleep(300 * time.Millisecond)
		return m, nil
	}})
	cfg := moe.DefaultConfig()
	cl, err := inference.NewSGLang(inference.SGLangOptions{URL: serveStandin(t, srv), Timeout: 50 * time.Millisecond, LoadTimeout: time.Minute,
		Layers: cfg.Layers, TopK: cfg.TopK})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.LoadWeights(context.Background(), "/ckpt/v1", "1"); err != nil {
		t.Fatal(err)
	}
}
