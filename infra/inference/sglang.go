package inference

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/t1pipe/t1/moe"
)

// SGLang's native /generate wire format (a single, non-streaming request).

type sglRequest struct {
	InputIDs            []int          `json:"input_ids"`
	Text                any            `json:"text,omitempty"`
	SamplingParams      SamplingParams `json:"sampling_params"`
	ReturnLogprob       bool           `json:"return_logprob"`
	ReturnRoutedExperts bool           `json:"return_routed_experts"`
	Stream              bool           `json:"stream,omitempty"`
}

type sglResponse struct {
	Text      string  `json:"text"`
	OutputIDs []int   `json:"output_ids"`
	MetaInfo  sglMeta `json:"meta_info"`
}

type sglMeta struct {
	ID               string     `json:"id,omitempty"`
	FinishReason     *sglFinish `json:"finish_reason"`
	PromptTokens     int        `json:"prompt_tokens"`
	CompletionTokens int        `json:"completion_tokens"`
	// OutputTokenLogprobs entries are [logprob, token_id, token_text|null].
	OutputTokenLogprobs []json.RawMessage `json:"output_token_logprobs,omitempty"`
	// RoutedExperts is base64 of little-endian int32
	// [prompt+completion−1, layers, top_k], C order.
	RoutedExperts *string `json:"routed_experts,omitempty"`
	WeightVersion string  `json:"weight_version,omitempty"`
	// RoutedExpertsShape is a t1 extension (SGLang leaves the reshape to
	// the client, which knows the model); clients prefer it when present.
	RoutedExpertsShape []int `json:"routed_experts_shape,omitempty"`
}

// sglFinish is {"type":"stop","matched":id} or {"type":"length","length":n}.
type sglFinish struct {
	Type    string `json:"type"`
	Matched any    `json:"matched,omitempty"`
	Length  int    `json:"length,omitempty"`
	Message string `json:"message,omitempty"`
}

// EncodeRoutedExperts packs routing as SGLang does: base64 (standard, with
// padding) of the little-endian int32 ids.
func EncodeRoutedExperts(r moe.Routing) string {
	b := make([]byte, 0, 4*len(r.Experts))
	for _, e := range r.Experts {
		b = binary.LittleEndian.AppendUint32(b, uint32(e))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeRoutedExperts unpacks SGLang's routed_experts for a sequence of
// tokens processed tokens (prompt+completion−1) and a model with the given
// layers and top_k; layers or topK 0 means unknown, derived from the rest.
func DecodeRoutedExperts(s string, tokens, layers, topK int) (moe.Routing, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return moe.Routing{}, fmt.Errorf("routed_experts: %w", err)
	}
	if len(b)%4 != 0 {
		return moe.Routing{}, fmt.Errorf("routed_experts: %d bytes is not a whole number of int32", len(b))
	}
	n := len(b) / 4
	switch {
	case tokens <= 0:
		return moe.Routing{}, fmt.Errorf("routed_experts: %d ids for %d processed tokens", n, tokens)
	case layers > 0 && topK > 0:
	case layers > 0 && n%(tokens*layers) == 0:
		topK = n / (tokens * layers)
	case topK > 0 && n%(tokens*topK) == 0:
		layers = n / (tokens * topK)
	default:
		return moe.Routing{}, fmt.Errorf("routed_experts: cannot reshape %d ids for %d tokens without the model's layers and top_k (set them in the inference configuration)", n, tokens)
	}
	if n != tokens*layers*topK {
		return moe.Routing{}, fmt.Errorf("routed_experts: %d ids, want %d tokens × %d layers × top_k %d = %d", n, tokens, layers, topK, tokens*layers*topK)
	}
	r := moe.NewRouting(tokens, layers, topK)
	for i := range r.Experts {
		r.Experts[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	sortSets(r)
	return r, nil
}

// sortSets puts every (token, layer) set in ascending order, as
// moe.Routing holds them: servers send the router's order (SGLang 0.5.23
// and vLLM: descending probability from the topk_softmax kernels, but
// torch.topk(sorted=False) on the grouped and biased paths in
// python/sglang/srt/layers/moe/topk.py), which no one may rely on.
func sortSets(r moe.Routing) {
	for i := 0; i+r.TopK <= len(r.Experts) && r.TopK > 0; i += r.TopK {
		slices.Sort(r.Experts[i : i+r.TopK])
	}
}

// SGLangOptions configure an SGLang client.
type SGLangOptions struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:30000.
	URL string
	// Timeout bounds one request; 0 means none beyond the context.
	Timeout time.Duration
	// LoadTimeout bounds one /update_weights_from_disk, which waits for
	// the generations in flight and reads the whole checkpoint; 0 means
	// none beyond the context.
	LoadTimeout time.Duration
	// Layers and TopK reshape routed_experts (SGLang sends a flat array).
	// Needed unless the server sends routed_experts_shape (t1's does).
	Layers, TopK int
	// Client is the HTTP client; nil uses a new one.
	Client *http.Client
}

// SGLang is a client of an SGLang server's native /generate endpoint
// (started with --enable-return-routed-experts for routing), or of t1's
// own server, which speaks the same format.
type SGLang struct {
	opt SGLangOptions
	hc  *http.Client
}

// NewSGLang returns a client; it does not contact the server.
func NewSGLang(opt SGLangOptions) (*SGLang, error) {
	if opt.URL == "" {
		return nil, errors.New("sglang: url is required")
	}
	if !strings.HasPrefix(opt.URL, "http://") && !strings.HasPrefix(opt.URL, "https://") {
		return nil, fmt.Errorf("sglang: url %q must start with http:// or https://", opt.URL)
	}
	hc := opt.Client
	if hc == nil {
		hc = &http.Client{}
	}
	opt.URL = strings.TrimRight(opt.URL, "/")
	return &SGLang{opt: opt, hc: hc}, nil
}

// Generate implements Engine with POST /generate.
func (c *SGLang) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	if len(req.InputIDs) == 0 {
		return nil, badRequest("sglang: input_ids is empty")
	}
	body, err := json.Marshal(sglRequest{InputIDs: req.InputIDs, SamplingParams: req.SamplingParams,
		ReturnLogprob: req.ReturnLogprob, ReturnRoutedExperts: req.ReturnRoutedExperts})
	if err != nil {
		return nil, fmt.Errorf("sglang: %w", err)
	}
	var raw sglResponse
	if err := postJSON(ctx, c.hc, c.opt.Timeout, c.opt.URL+"/generate", body, &raw); err != nil {
		return nil, fmt.Errorf("sglang: %w", err)
	}
	resp, err := fromSGLang(raw, req, c.opt.Layers, c.opt.TopK)
	if err != nil {
		return nil, fmt.Errorf("sglang: %s/generate: %w", c.opt.URL, err)
	}
	return resp, nil
}

// fromSGLang maps a /generate response onto GenerateResponse.
func fromSGLang(raw sglResponse, req GenerateRequest, layers, topK int) (*GenerateResponse, error) {
	m := raw.MetaInfo
	resp := &GenerateResponse{OutputIDs: raw.OutputIDs, PromptTokens: m.PromptTokens, CompletionTokens: m.CompletionTokens, WeightVersion: m.WeightVersion}
	var lps []float32
	var lpIDs []int
	for i, e := range m.OutputTokenLogprobs {
		var tuple []json.RawMessage
		if err := json.Unmarshal(e, &tuple); err != nil || len(tuple) < 2 {
			return nil, fmt.Errorf("meta_info.output_token_logprobs[%d]: want [logprob, token_id, text]", i)
		}
		var lp float64
		var id int
		if err := json.Unmarshal(tuple[0], &lp); err != nil {
			return nil, fmt.Errorf("meta_info.output_token_logprobs[%d][0]: %w", i, err)
		}
		if err := json.Unmarshal(tuple[1], &id); err != nil {
			return nil, fmt.Errorf("meta_info.output_token_logprobs[%d][1]: %w", i, err)
		}
		lps = append(lps, float32(lp))
		lpIDs = append(lpIDs, id)
	}
	if resp.OutputIDs == nil {
		resp.OutputIDs = lpIDs // older servers omit output_ids; the log-prob tuples carry them
	}
	if req.ReturnLogprob {
		if len(lps) != len(resp.OutputIDs) {
			return nil, fmt.Errorf("meta_info.output_token_logprobs has %d entries for %d output ids", len(lps), len(resp.OutputIDs))
		}
		for i := range lpIDs {
			if lpIDs[i] != resp.OutputIDs[i] {
				return nil, fmt.Errorf("meta_info.output_token_logprobs[%d] is for token %d, output_ids has %d", i, lpIDs[i], resp.OutputIDs[i])
			}
		}
		resp.OutputTokenLogprobs = lps
	}
	if resp.PromptTokens == 0 {
		resp.PromptTokens = len(req.InputIDs)
	}
	if resp.CompletionTokens == 0 {
		resp.CompletionTokens = len(resp.OutputIDs)
	}
	if f := m.FinishReason; f != nil {
		if f.Type == FinishAbort {
			return nil, fmt.Errorf("the server aborted the request: %s", f.Message)
		}
		resp.FinishReason = f.Type
		if f.Type == FinishStop {
			if v, ok := f.Matched.(float64); ok {
				id := int(v)
				resp.MatchedStop = &id
			}
		}
	}
	if req.ReturnRoutedExperts {
		if m.RoutedExperts == nil {
			resp.RoutingUnavailable = "the server returned no meta_info.routed_experts (start SGLang with --enable-return-routed-experts)"
		} else {
			tokens := resp.PromptTokens + len(resp.OutputIDs) - 1
			if s := m.RoutedExpertsShape; len(s) == 3 {
				if s[0] != tokens {
					return nil, fmt.Errorf("meta_info.routed_experts_shape %v, want %d tokens", s, tokens)
				}
				layers, topK = s[1], s[2]
			}
			r, err := DecodeRoutedExperts(*m.RoutedExperts, tokens, layers, topK)
			if err != nil {
				return nil, fmt.Errorf("meta_info.%w", err)
			}
			resp.RoutedExperts = &r
		}
	}
	return resp, nil
}

// postJSON posts body and decodes a 200 answer into out; any other status
// becomes an error quoting the start of the answer.
func postJSON(ctx context.Context, hc *http.Client, timeout time.Duration, url string, body []byte, out any) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(hr)
	if err != nil {
		return unavailable(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 256<<20))
	if err != nil {
		return unavailable(fmt.Errorf("%s: reading the answer: %w", url, err))
	}
	if res.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(b))
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		return statusError(fmt.Errorf("%s: HTTP %d: %s", url, res.StatusCode, msg), res.StatusCode)
	}
	return decodeAnswer(url, b, out)
}

// decodeAnswer decodes a 200 answer into out: nil ignores it, a
// *json.RawMessage takes it as it is (possibly empty: vLLM's dev
// endpoints answer an empty 200).
func decodeAnswer(url string, b []byte, out any) error {
	switch o := out.(type) {
	case nil:
		return nil
	case *json.RawMessage:
		*o = bytes.TrimSpace(b)
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: answer is not the expected JSON: %w", url, err)
	}
	return nil
}

// unavailable marks a failure of the transport (refused, reset, cut off
// or timed out): the engine, not the request, is at fault, so another
// engine may answer the same request.
func unavailable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }

// errNotFound marks a 404: an endpoint the server does not have.
var errNotFound = errors.New("not found")

func isNotFound(err error) bool { return errors.Is(err, errNotFound) }

// statusError classifies a non-200 answer: 400 is the request's fault,
// 5xx the server's (an engine restarting or overloaded answers 502-504
// through a proxy, 500 when a worker died).
func statusError(err error, status int) error {
	switch {
	case status == http.StatusBadRequest:
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	case status == http.StatusNotFound:
		return fmt.Errorf("%w: %w", errNotFound, err)
	case status >= 500:
		return unavailable(err)
	}
	return err
}

// getJSON GETs url and decodes a 200 answer into out.
func getJSON(ctx context.Context, hc *http.Client, timeout time.Duration, url string, out any) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := hc.Do(hr)
	if err != nil {
		return unavailable(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return unavailable(fmt.Errorf("%s: reading the answer: %w", url, err))
	}
	if res.StatusCode != http.StatusOK {
		return statusError(fmt.Errorf("%s: HTTP %d: %.300s", url, res.StatusCode, strings.TrimSpace(string(b))), res.StatusCode)
	}
	return decodeAnswer(url, b, out)
}

// UpdateWeightsFromDisk asks the server to load the weights at modelPath
// (POST /update_weights_from_disk, as SGLang has it) and report them as
// version.
func (c *SGLang) UpdateWeightsFromDisk(ctx context.Context, modelPath, version string) error {
	body, err := json.Marshal(updateRequest{ModelPath: modelPath, WeightVersion: version})
	if err != nil {
		return err
	}
	var res updateResponse
	// SGLang 0.5.23 answers 400 with {"success": false, "message"} when
	// the load fails (tokenizer_manager.py).
	if err := postJSON(ctx, c.hc, c.opt.LoadTimeout, c.opt.URL+"/update_weights_from_disk", body, &res); err != nil {
		return fmt.Errorf("sglang: update weights: %w", err)
	}
	if !res.Success {
		return fmt.Errorf("sglang: update weights from %s: %s", modelPath, res.Message)
	}
	return nil
}

// Health checks GET /health.
func (c *SGLang) Health(ctx context.Context) error {
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, c.opt.URL+"/health", nil)
	if err != nil {
		return err
	}
	res, err := c.hc.Do(hr)
	if err != nil {
		return fmt.Errorf("sglang: health: %w", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("sglang: health: %s/health answered HTTP %d", c.opt.URL, res.StatusCode)
	}
	return nil
}
