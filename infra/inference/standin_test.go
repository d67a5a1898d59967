package inference_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
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

// lastBody keeps the body of the last response a client read, as the
// server sent it (the clients sort the routed experts they decode).
type lastBody struct {
	mu   sync.Mutex
	body []byte
}

func (lb *lastBody) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	lb.mu.Lock()
	lb.body = b
	lb.mu.Unlock()
	res.Body = io.NopCloser(bytes.NewReader(b))
	return res, nil
}

func (lb *lastBody) get() []byte {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.body
}

// wireRouting reads the routed experts of a raw SGLang or vLLM response in
// the order the server listed them: [rows, layers, topK].
func wireRouting(t *testing.T, body []byte, layers, topK int) [][][]int32 {
	t.Helper()
	var r struct {
		MetaInfo struct {
			RoutedExperts string `json:"routed_experts"`
		} `json:"meta_info"`
		Choices []struct {
			RoutedExperts json.RawMessage `json:"routed_experts"`
		} `json:"choices"`
		PromptRoutedExperts [][][]int32 `json:"prompt_routed_experts"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	var flat []int32
	switch {
	case r.MetaInfo.RoutedExperts != "":
		// SGLang: base64 of little-endian int32.
		b, err := base64.StdEncoding.DecodeString(r.MetaInfo.RoutedExperts)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+4 <= len(b); i += 4 {
			flat = append(flat, int32(binary.LittleEndian.Uint32(b[i:])))
		}
	case len(r.Choices) == 1 && len(r.Choices[0].RoutedExperts) > 0 && r.Choices[0].RoutedExperts[0] == '[':
		// vLLM 0.21: nested lists, the prompt's rows beside the choice.
		var gen [][][]int32
		if err := json.Unmarshal(r.Choices[0].RoutedExperts, &gen); err != nil {
			t.Fatal(err)
		}
		return append(r.PromptRoutedExperts, gen...)
	case len(r.Choices) == 1 && len(r.Choices[0].RoutedExperts) > 0:
		// vLLM 0.34: base64 of np.save bytes, uint8 ids (≤ 256 experts).
		var s string
		if err := json.Unmarshal(r.Choices[0].RoutedExperts, &s); err != nil {
			t.Fatal(err)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) < 10 || !bytes.HasPrefix(b, []byte("\x93NUMPY\x01\x00")) {
			t.Fatalf("routed_experts is not a .npy: %v", err)
		}
		hdr := int(binary.LittleEndian.Uint16(b[8:]))
		if !strings.Contains(string(b[10:10+hdr]), "'|u1'") {
			t.Fatalf(".npy header %q, want uint8", b[10:10+hdr])
		}
		for _, e := range b[10+hdr:] {
			flat = append(flat, int32(e))
		}
	default:
		t.Fatalf("no routed experts in %s", body)
	}
	if len(flat)%(layers*topK) != 0 {
		t.Fatalf("%d expert ids for %d layers × top_k %d", len(flat), layers, topK)
	}
	rows := make([][][]int32, len(flat)/(layers*topK))
	for tk := range rows {
		rows[tk] = make([][]int32, layers)
		for l := range rows[tk] {
			i := (tk*layers + l) * topK
			rows[tk][l] = flat[i : i+topK]
		}
	}
	return rows
}

// TestStandinsListExpertsByScore: every stand-in lists a token's experts
// as the real servers' top-k kernels write them, highest router
// probability first, checked against the router probabilities of the
// model's own forward over the prompt and output.
func TestStandinsListExpertsByScore(t *testing.T) {
	m := standinModel(t)
	cfg := m.Cfg
	req := inference.GenerateRequest{InputIDs: standinPrompt(), ReturnLogprob: true, ReturnRoutedExperts: true,
		SamplingParams: inference.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 24, Seed: 9}}
	type server struct {
		name string
		h    http.Handler
		vllm bool
	}
	servers := []server{{"sglang-0.5.23", standin.NewSGLang(m, standin.SGLangOptions{ReturnRoutedExperts: true, Deterministic: true}), false}}
	for _, v := range []string{standin.VLLM021, standin.VLLM034} {
		servers = append(servers, server{"vllm-" + v, standin.NewVLLM(m, standin.VLLMOptions{Version: v, ReturnRoutedExperts: true}), true})
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			lb := &lastBody{}
			hc := &http.Client{Transport: lb}
			url := serveStandin(t, srv.h)
			var eng inference.Engine
			var err error
			if srv.vllm {
				eng, err = inference.NewVLLM(inference.VLLMOptions{URL: url, Model: "standin", Timeout: time.Minute, LoadTimeout: time.Minute,
					Layers: cfg.Layers, TopK: cfg.TopK, Client: hc})
			} else {
				eng, err = inference.NewSGLang(inference.SGLangOptions{URL: url, Timeout: time.Minute, LoadTimeout: time.Minute,
					Layers: cfg.Layers, TopK: cfg.TopK, Client: hc})
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := eng.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			rows := wireRouting(t, lb.get(), cfg.Layers, cfg.TopK)
			ids := append(slices.Clone(req.InputIDs), got.OutputIDs...)
			if len(rows) != len(ids)-1 {
				t.Fatalf("%d routed rows for %d tokens, want %d", len(rows), len(ids), len(ids)-1)
			}
			pass, err := m.Forward(ids, moe.ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			E := cfg.Experts
			// Sets whose score order is not ascending ids, and not
			// descending ids: with both present, neither id order passes.
			notAsc, notDesc := 0, 0
			for l := range cfg.Layers {
				probs := pass.RouterProbs(l)
				for tk, row := range rows {
					set, p := row[l], probs[tk*E:(tk+1)*E]
					for j := 1; j < len(set); j++ {
						a, b := set[j-1], set[j]
						if !(p[a] > p[b] || p[a] == p[b] && a < b) {
							t.Fatalf("token %d layer %d: experts %v have router probabilities %v, %v: not highest first", tk, l, set, p[a], p[b])
						}
					}
					if live := pass.LiveRouting.At(tk, l); !slices.Equal(slices.Sorted(slices.Values(set)), live) {
						t.Fatalf("token %d layer %d: experts %v, the router's top-%d %v", tk, l, set, cfg.TopK, live)
					}
					if !slices.IsSorted(set) {
						notAsc++
					}
					if !slices.IsSortedFunc(set, func(a, b int32) int { return cmp.Compare(b, a) }) {
						notDesc++
					}
				}
			}
			if notAsc == 0 || notDesc == 0 {
				t.Fatalf("%d sets not in ascending ids, %d not in descending ids: the prompt does not tell score order from id order", notAsc, notDesc)
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

// TestVLLMReloadsAfterRestart: vLLM's replies name no weight version, but
// a 0.34 server keeps the one t1 sets after each load and reads "default"
// again after a restart. An engine restarted while no episode sampled
// (during an update) has the held version loaded again before the next
// episode samples from it: its tokens are that version's, not the
// weights the server started with.
func TestVLLMReloadsAfterRestart(t *testing.T) {
	initial := standinModel(t)
	cfg := initial.Cfg
	cfg.Seed = 77
	trained, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := standin.NewVLLM(initial, standin.VLLMOptions{Version: standin.VLLM034, Load: func(string) (*moe.Model, error) { return trained, nil }})
	s := inference.NewSynced(vllmClient(t, serveStandin(t, srv), ""))
	ctx := context.Background()
	req := inference.GenerateRequest{InputIDs: standinPrompt(), ReturnLogprob: true,
		SamplingParams: inference.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 8, Seed: 3}}
	want := reference(t, trained, req)
	for episode := range 2 {
		eng, release, err := s.Hold(ctx, "1", func(context.Context) (string, error) { return "/ckpt/v1", nil })
		if err != nil {
			t.Fatal(err)
		}
		got, err := eng.Generate(ctx, req)
		release()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.OutputTokenLogprobs, want.OutputTokenLogprobs) {
			t.Fatalf("episode %d: not version 1's log-probs", episode)
		}
		srv.Restart()
	}
	if srv.Reloads() != 2 || s.Loads() != 2 {
		t.Fatalf("%d server reloads, %d Synced loads; want 2 (once more after the restart)", srv.Reloads(), s.Loads())
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
