package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/moe"
)

func testReference(t testing.TB) (*Reference, *moe.Tokenizer) {
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
	return NewReference(m, tok, moe.BF16, "v3"), tok
}

// serve starts a real loopback server for eng and returns its base URL.
func serve(t *testing.T, eng Engine) string {
	t.Helper()
	return serveHandler(t, NewServer(eng, "t1-reference", nil))
}

// serveHandler serves h on a loopback port until the test ends.
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- ListenAndServe(ctx, "127.0.0.1:0", h, func(a string) { addrc <- a })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case a := <-addrc:
		return "http://" + a
	case err := <-done:
		t.Fatal(err)
	}
	return ""
}

// TestHTTPMatchesInProcess: the SGLang client talking to t1's server over
// loopback gets exactly what the in-process engine returns.
func TestHTTPMatchesInProcess(t *testing.T) {
	ref, tok := testReference(t)
	url := serve(t, ref)
	cl, err := NewSGLang(SGLangOptions{URL: url, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	end, _ := tok.SpecialID(moe.TokEnd)
	req := GenerateRequest{
		InputIDs:            tok.Encode("<|user|>ls /tmp<|end|><|assistant|>"),
		SamplingParams:      SamplingParams{Temperature: 1, TopP: 0.95, MaxNewTokens: 40, StopTokenIDs: []int{end}, Seed: 7},
		ReturnLogprob:       true,
		ReturnRoutedExperts: true,
	}
	want, err := ref.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.OutputIDs, want.OutputIDs) || !slices.Equal(got.OutputTokenLogprobs, want.OutputTokenLogprobs) {
		t.Fatalf("ids/logprobs differ over HTTP:\n%v %v\n%v %v", got.OutputIDs, got.OutputTokenLogprobs, want.OutputIDs, want.OutputTokenLogprobs)
	}
	if got.RoutedExperts == nil || !slices.Equal(got.RoutedExperts.Experts, want.RoutedExperts.Experts) {
		t.Fatal("routing differs over HTTP")
	}
	r := got.RoutedExperts
	if r.Tokens != len(req.InputIDs)+len(got.OutputIDs)-1 || r.Layers != 2 || r.TopK != 2 {
		t.Fatalf("routing shape [%d %d %d]", r.Tokens, r.Layers, r.TopK)
	}
	if got.FinishReason != want.FinishReason || got.WeightVersion != "v3" || got.PromptTokens != len(req.InputIDs) || got.CompletionTokens != len(got.OutputIDs) {
		t.Fatalf("meta: %+v", got)
	}
	if (got.MatchedStop == nil) != (want.MatchedStop == nil) {
		t.Fatalf("matched stop %v vs %v", got.MatchedStop, want.MatchedStop)
	}
	// A client that knows the model reshapes without the t1 extension.
	noShape, err := fromSGLang(sglResponse{OutputIDs: got.OutputIDs, MetaInfo: sglMeta{PromptTokens: got.PromptTokens,
		RoutedExperts: ptr(EncodeRoutedExperts(*got.RoutedExperts))}}, GenerateRequest{InputIDs: req.InputIDs, ReturnRoutedExperts: true}, 2, 2)
	if err != nil || !slices.Equal(noShape.RoutedExperts.Experts, got.RoutedExperts.Experts) {
		t.Fatalf("reshape from layers/top_k: %v", err)
	}
	// Not asking for logprobs or routing returns neither.
	req.ReturnLogprob, req.ReturnRoutedExperts = false, false
	plain, err := cl.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if plain.OutputTokenLogprobs != nil || plain.RoutedExperts != nil || !slices.Equal(plain.OutputIDs, want.OutputIDs) {
		t.Fatalf("plain request: %+v", plain)
	}
}

func ptr[T any](v T) *T { return &v }

// TestServerWire checks the raw JSON a plain HTTP client sees.
func TestServerWire(t *testing.T) {
	ref, _ := testReference(t)
	url := serve(t, ref)
	post := func(body string) (int, map[string]any) {
		res, err := http.Post(url+"/generate", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return res.StatusCode, m
	}
	// Missing sampling fields take SGLang's defaults (temperature 1,
	// max_new_tokens 128).
	code, m := post(`{"input_ids":[1,2,3],"return_logprob":true,"return_routed_experts":true}`)
	if code != 200 {
		t.Fatalf("status %d: %v", code, m)
	}
	meta := m["meta_info"].(map[string]any)
	if ids := m["output_ids"].([]any); len(ids) != 128 {
		t.Fatalf("%d output ids, want the default 128", len(ids))
	}
	if fr := meta["finish_reason"].(map[string]any); fr["type"] != "length" {
		t.Fatalf("finish_reason %v", fr)
	}
	lp := meta["output_token_logprobs"].([]any)
	if e := lp[0].([]any); len(e) != 3 {
		t.Fatalf("logprob entry %v, want [logprob, id, text]", e)
	}
	if _, ok := meta["routed_experts"].(string); !ok {
		t.Fatalf("routed_experts is %T, want a base64 string", meta["routed_experts"])
	}
	for _, bad := range []struct{ body, want string }{
		{`{"input_ids":[[1,2],[3]]}`, "batches"},
		{`{"input_ids":[]}`, "input_ids"},
		{`{"text":"hello"}`, "input_ids only"},
		{`{"input_ids":[1],"stream":true}`, "stream"},
		{`{"input_ids":[99999]}`, "vocabulary"},
		{`{"input_ids":[1],"sampling_params":{"top_p":2}}`, "top_p"},
		{`nope`, "invalid"},
	} {
		code, m := post(bad.body)
		msg, _ := m["error"].(map[string]any)["message"].(string)
		if code != 400 || !strings.Contains(msg, bad.want) {
			t.Errorf("%s: status %d, %q; want 400 mentioning %q", bad.body, code, msg, bad.want)
		}
	}
	res, err := http.Get(url + "/get_model_info")
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	_ = json.NewDecoder(res.Body).Decode(&info)
	res.Body.Close()
	if info["weight_version"] != "v3" || info["model_path"] != "t1-reference" {
		t.Fatalf("model info %v", info)
	}
	if res, err := http.Get(url + "/health"); err != nil || res.StatusCode != 200 {
		t.Fatalf("health: %v %v", res, err)
	}
	// The client surfaces a 400 as ErrBadRequest.
	cl, _ := NewSGLang(SGLangOptions{URL: url})
	if _, err := cl.Generate(context.Background(), GenerateRequest{InputIDs: []int{99999}, SamplingParams: DefaultSampling()}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("bad id: %v", err)
	}
}

func TestSetPolicySwapsVersion(t *testing.T) {
	ref, tok := testReference(t)
	cfg := ref.Config()
	cfg.Seed = 99
	m2, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := GenerateRequest{InputIDs: tok.Encode("<|user|>hi<|end|>"), SamplingParams: SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 20, Seed: 1}, ReturnLogprob: true}
	a, err := ref.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ref.SetPolicy(m2, tok, "v4")
	b, err := ref.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if b.WeightVersion != "v4" || slices.Equal(a.OutputTokenLogprobs, b.OutputTokenLogprobs) || ref.Precision() != moe.BF16 {
		t.Fatalf("policy swap: %s, same logprobs %v", b.WeightVersion, slices.Equal(a.OutputTokenLogprobs, b.OutputTokenLogprobs))
	}
}

// TestSGLangFixture decodes an answer shaped like SGLang's (no t1 shape
// extension, extra fields) with the model's layers and top_k.
func TestSGLangFixture(t *testing.T) {
	b, err := os.ReadFile(testdata("sglang_generate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw sglResponse
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	req := GenerateRequest{InputIDs: []int{10, 11, 12}, ReturnLogprob: true, ReturnRoutedExperts: true}
	r, err := fromSGLang(raw, req, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.OutputIDs, []int{301, 261}) || r.OutputTokenLogprobs[1] != float32(-1.2039728) || r.FinishReason != "stop" || *r.MatchedStop != 261 {
		t.Fatalf("%+v", r)
	}
	if got := r.RoutedExperts.At(3, 1); !slices.Equal(got, []int32{6, 7}) || r.RoutedExperts.Tokens != 4 {
		t.Fatalf("routing %v", r.RoutedExperts)
	}
	// Only layers known: top_k is derived.
	if r, err := fromSGLang(raw, req, 2, 0); err != nil || r.RoutedExperts.TopK != 2 {
		t.Fatalf("derive top_k: %v", err)
	}
	if _, err := fromSGLang(raw, req, 0, 0); err == nil || !strings.Contains(err.Error(), "layers and top_k") {
		t.Fatalf("unknown shape: %v", err)
	}
	if _, err := fromSGLang(raw, req, 3, 2); err == nil {
		t.Fatal("wrong layers accepted")
	}
	aborted := raw
	aborted.MetaInfo.FinishReason = &sglFinish{Type: "abort", Message: "prompt too long"}
	if _, err := fromSGLang(aborted, req, 2, 2); err == nil || !strings.Contains(err.Error(), "prompt too long") {
		t.Fatalf("abort: %v", err)
	}
	raw.MetaInfo.RoutedExperts = nil
	r, err = fromSGLang(raw, req, 2, 2)
	if err != nil || r.RoutedExperts != nil || !strings.Contains(r.RoutingUnavailable, "--enable-return-routed-experts") {
		t.Fatalf("missing routing: %+v %v", r, err)
	}
}

func TestVLLMFixture(t *testing.T) {
	b, err := os.ReadFile(testdata("vllm_completion.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw vllmResponse
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	req := GenerateRequest{InputIDs: []int{10, 11, 12}, ReturnLogprob: true, ReturnRoutedExperts: true}
	r, err := fromVLLM(raw, req, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.OutputIDs, []int{301, 261}) || r.OutputTokenLogprobs[0] != float32(-0.5108256) || r.FinishReason != "stop" || *r.MatchedStop != 261 || r.CompletionTokens != 2 {
		t.Fatalf("%+v", r)
	}
	if r.RoutedExperts != nil || r.RoutingUnavailable != RoutingUnavailableVLLM {
		t.Fatalf("routing marker: %+v", r)
	}
	// Without choices[].token_ids the ids come from token_id:<id> strings.
	raw.Choices[0].TokenIDs = nil
	if r, err := fromVLLM(raw, req, 0, 0); err != nil || !slices.Equal(r.OutputIDs, []int{301, 261}) {
		t.Fatalf("ids from logprobs: %v %v", r, err)
	}
	raw.Choices[0].Logprobs.Tokens[0] = "hello"
	if _, err := fromVLLM(raw, req, 0, 0); err == nil || !strings.Contains(err.Error(), "token_id:") {
		t.Fatalf("bad token string: %v", err)
	}
	// The request the client sends uses token ids and asks for them back.
	body, _ := json.Marshal(vllmRequest{Prompt: []int{1, 2}, ReturnTokensAsTokenIDs: true})
	if !bytes.Contains(body, []byte(`"prompt":[1,2]`)) || !bytes.Contains(body, []byte(`"return_tokens_as_token_ids":true`)) {
		t.Fatalf("request %s", body)
	}
}

func TestRoutedExpertsCodec(t *testing.T) {
	r := moe.NewRouting(3, 2, 2)
	for i := range r.Experts {
		r.Experts[i] = int32(i * 7 % 300)
	}
	back, err := DecodeRoutedExperts(EncodeRoutedExperts(r), 3, 2, 2)
	if err != nil || !slices.Equal(back.Experts, r.Experts) {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"!!", "AAA=", EncodeRoutedExperts(r)[:8]} {
		if _, err := DecodeRoutedExperts(bad, 3, 2, 2); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func FuzzDecodeRoutedExperts(f *testing.F) {
	f.Add("AQAAAAIAAAA=", 1, 1, 2)
	f.Add("", 0, 0, 0)
	f.Fuzz(func(t *testing.T, s string, tokens, layers, topK int) {
		if layers < 0 || topK < 0 || layers > 1<<10 || topK > 1<<10 || tokens > 1<<16 {
			return
		}
		r, err := DecodeRoutedExperts(s, tokens, layers, topK)
		if err != nil {
			return
		}
		if len(r.Experts) != r.Tokens*r.Layers*r.TopK {
			t.Fatalf("shape %d×%d×%d for %d ids", r.Tokens, r.Layers, r.TopK, len(r.Experts))
		}
		if EncodeRoutedExperts(r) != s {
			// Base64 has one canonical encoding of given bytes; padding
			// variants are rejected by StdEncoding.
			back, err := DecodeRoutedExperts(EncodeRoutedExperts(r), r.Tokens, r.Layers, r.TopK)
			if err != nil || !slices.Equal(back.Experts, r.Experts) {
				t.Fatal("re-encoding changed the routing")
			}
		}
	})
}

// TestConcurrentRequests: parallel requests over HTTP each get exactly what
// they get alone (the prefix cache and the server are shared).
func TestConcurrentRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("many concurrent generations: skipped with -short")
	}
	ref, tok := testReference(t)
	url := serve(t, ref)
	cl, err := NewSGLang(SGLangOptions{URL: url, Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]GenerateRequest, 6)
	wants := make([]*GenerateResponse, len(reqs))
	for i := range reqs {
		reqs[i] = GenerateRequest{InputIDs: tok.Encode("<|user|>task " + strings.Repeat("x", i) + "<|end|>"),
			SamplingParams: SamplingParams{Temperature: 0.8, TopP: 0.9, MaxNewTokens: 30, Seed: uint64(i)}, ReturnLogprob: true, ReturnRoutedExperts: true}
		if wants[i], err = ref.Generate(context.Background(), reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, len(reqs))
	for i := range reqs {
		go func() {
			got, err := cl.Generate(context.Background(), reqs[i])
			if err == nil && (!slices.Equal(got.OutputIDs, wants[i].OutputIDs) || !slices.Equal(got.OutputTokenLogprobs, wants[i].OutputTokenLogprobs) ||
				!slices.Equal(got.RoutedExperts.Experts, wants[i].RoutedExperts.Experts)) {
				err = errors.New("concurrent answer differs")
			}
			errs <- err
		}()
	}
	for range reqs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestGenerateCancelled(t *testing.T) {
	ref, _ := testReference(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ref.Generate(ctx, GenerateRequest{InputIDs: []int{1, 2}, SamplingParams: DefaultSampling()})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrBadRequest) {
		t.Fatalf("cancelled: %v", err)
	}
}
