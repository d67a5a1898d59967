package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// VLLMOptions configure a vLLM client.
type VLLMOptions struct {
	// URL is the server's base URL (without /v1), e.g. http://127.0.0.1:8000.
	URL string
	// Model is the served model name the completions API wants.
	Model   string
	Timeout time.Duration
	// LoadTimeout bounds one weight reload (reload_weights and the prefix
	// cache reset after it); 0 means none beyond the context.
	LoadTimeout time.Duration
	// LogprobsMode is the server's --logprobs-mode. vLLM's default,
	// raw_logprobs ("" here), reports log-probs before temperature and
	// top-p (vllm/config/model.py, 0.21.0 and 0.34.0): the sampled
	// distribution's only at temperature 1 (or greedy) and top_p 1, so
	// the client refuses other sampling unless the server runs
	// processed_logprobs, the log-probs of the distribution sampled from.
	LogprobsMode string
	// Layers and TopK check the routing's shape, and reshape it if a
	// server returns it as a flat base64 array (as SGLang does).
	Layers, TopK int
	Client       *http.Client
}

// vLLM's --logprobs-mode values t1 knows.
const (
	VLLMRawLogprobs       = "raw_logprobs"
	VLLMProcessedLogprobs = "processed_logprobs"
)

// VLLM is a client of vLLM's OpenAI-compatible completions API with a
// token-id prompt. A server started with --enable-return-routed-experts
// returns routing (0.21.0 as nested lists, 0.34.0 as a base64 .npy); else
// a request for it gets RoutingUnavailable set. It checks GET /version
// before its first request.
type VLLM struct {
	opt VLLMOptions
	hc  *http.Client

	mu      sync.Mutex
	version string // the server's GET /version, once checked
}

// NewVLLM returns a client; it does not contact the server.
func NewVLLM(opt VLLMOptions) (*VLLM, error) {
	if opt.URL == "" {
		return nil, errors.New("vllm: url is required")
	}
	if !strings.HasPrefix(opt.URL, "http://") && !strings.HasPrefix(opt.URL, "https://") {
		return nil, fmt.Errorf("vllm: url %q must start with http:// or https://", opt.URL)
	}
	hc := opt.Client
	if hc == nil {
		hc = &http.Client{}
	}
	opt.URL = strings.TrimRight(opt.URL, "/")
	switch opt.LogprobsMode {
	case "", VLLMRawLogprobs, VLLMProcessedLogprobs:
	default:
		return nil, fmt.Errorf("vllm: logprobs mode %q: want %s or %s", opt.LogprobsMode, VLLMRawLogprobs, VLLMProcessedLogprobs)
	}
	return &VLLM{opt: opt, hc: hc}, nil
}

// minVLLM is the oldest vLLM t1 speaks to: 0.21.0 returns token ids and
// routed experts (vllm/entrypoints/openai/completion/protocol.py).
var minVLLM = [2]int{0, 21}

// ServerVersion asks GET /version once ({"version": "0.21.0"}) and
// refuses a server older than 0.21.
func (c *VLLM) ServerVersion(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != "" {
		return c.version, nil
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := getJSON(ctx, c.hc, c.opt.Timeout, c.opt.URL+"/version", &v); err != nil {
		return "", fmt.Errorf("vllm: %w", err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(v.Version, "%d.%d", &major, &minor); err != nil {
		return "", fmt.Errorf("vllm: %s/version answered version %q, want major.minor.patch", c.opt.URL, v.Version)
	}
	if major < minVLLM[0] || major == minVLLM[0] && minor < minVLLM[1] {
		return "", fmt.Errorf("vllm: the server at %s runs vLLM %s; t1 needs %d.%d or later (token ids, routed experts)", c.opt.URL, v.Version, minVLLM[0], minVLLM[1])
	}
	c.version = v.Version
	return c.version, nil
}

type vllmRequest struct {
	Model       string  `json:"model,omitempty"`
	Prompt      []int   `json:"prompt"`
	MaxTokens   int     `json:"max_tokens"`
	Temperature float64 `json:"temperature"`
	TopP        float64 `json:"top_p"`
	// Seed is within int64 (protocol.py: ge=-(2**63), le=2**63-1).
	Seed int64 `json:"seed"`
	// StopTokenIDs is a vLLM extension; the stop token is part of the
	// output, as with SGLang.
	StopTokenIDs []int `json:"stop_token_ids,omitempty"`
	// Logprobs 0 returns the sampled token's log-prob only.
	Logprobs *int `json:"logprobs,omitempty"`
	// ReturnTokensAsTokenIDs makes logprobs.tokens read "token_id:<id>".
	ReturnTokensAsTokenIDs bool `json:"return_tokens_as_token_ids"`
	// ReturnTokenIDs asks newer servers for choices[].token_ids.
	ReturnTokenIDs      bool `json:"return_token_ids"`
	SkipSpecialTokens   bool `json:"skip_special_tokens"`
	IncludeStopStrInOut bool `json:"include_stop_str_in_output"`
	// RoutedExpertsPromptStart 0 asks 0.34 for the prompt's rows too;
	// 0.21 ignores it (unknown fields are ignored).
	RoutedExpertsPromptStart *int `json:"routed_experts_prompt_start,omitempty"`
}

type vllmResponse struct {
	Choices []struct {
		TokenIDs []int `json:"token_ids"`
		Logprobs *struct {
			Tokens        []string   `json:"tokens"`
			TokenLogprobs []*float64 `json:"token_logprobs"`
		} `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
		// RoutedExperts is [gen, L, K] nested lists (0.21.0) or a base64
		// .npy (0.34.0); see decodeVLLMRouting.
		RoutedExperts json.RawMessage `json:"routed_experts"`
	} `json:"choices"`
	// PromptRoutedExperts is 0.21.0's [prompt, L, K].
	PromptRoutedExperts json.RawMessage `json:"prompt_routed_experts"`
	Usage               struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// RoutingUnavailableVLLM is the marker set when routing was asked of vLLM.
const RoutingUnavailableVLLM = "vllm: the server returned no routed experts (start vLLM 0.21 or later with --enable-return-routed-experts)"

// Generate implements Engine with POST /v1/completions.
func (c *VLLM) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	if len(req.InputIDs) == 0 {
		return nil, badRequest("vllm: input_ids is empty")
	}
	sp := req.SamplingParams
	if req.ReturnLogprob && c.opt.LogprobsMode != VLLMProcessedLogprobs && (sp.Temperature != 0 && sp.Temperature != 1 || sp.TopP > 0 && sp.TopP < 1) {
		return nil, badRequest("vllm: temperature %g, top_p %g: vLLM's default --logprobs-mode raw_logprobs reports log-probs before temperature and top-p, "+
			"not those of the distribution sampled from; start vLLM with --logprobs-mode processed_logprobs and set inference.vllm_logprobs_mode: processed_logprobs, "+
			"or sample at temperature 1 and top_p 1", sp.Temperature, sp.TopP)
	}
	if _, err := c.ServerVersion(ctx); err != nil {
		return nil, err
	}
	zero := 0
	vr := vllmRequest{Model: c.opt.Model, Prompt: req.InputIDs, MaxTokens: sp.MaxNewTokens, Temperature: sp.Temperature,
		TopP: sp.TopP, Seed: WireSeed(sp.Seed), StopTokenIDs: sp.StopTokenIDs, Logprobs: &zero, ReturnTokensAsTokenIDs: true,
		ReturnTokenIDs: true, IncludeStopStrInOut: true}
	if req.ReturnRoutedExperts {
		vr.RoutedExpertsPromptStart = &zero
	}
	body, err := json.Marshal(vr)
	if err != nil {
		return nil, fmt.Errorf("vllm: %w", err)
	}
	var raw vllmResponse
	if err := postJSON(ctx, c.hc, c.opt.Timeout, c.opt.URL+"/v1/completions", body, &raw); err != nil {
		return nil, fmt.Errorf("vllm: %w", err)
	}
	resp, err := fromVLLM(raw, req, c.opt.Layers, c.opt.TopK)
	if err != nil {
		return nil, fmt.Errorf("vllm: %s/v1/completions: %w", c.opt.URL, err)
	}
	return resp, nil
}

func fromVLLM(raw vllmResponse, req GenerateRequest, layers, topK int) (*GenerateResponse, error) {
	if len(raw.Choices) != 1 {
		return nil, fmt.Errorf("%d choices, want 1", len(raw.Choices))
	}
	ch := raw.Choices[0]
	resp := &GenerateResponse{OutputIDs: ch.TokenIDs, PromptTokens: raw.Usage.PromptTokens, CompletionTokens: raw.Usage.CompletionTokens}
	if lp := ch.Logprobs; lp != nil {
		var ids []int
		for i, tok := range lp.Tokens {
			s, ok := strings.CutPrefix(tok, "token_id:")
			id, err := strconv.Atoi(s)
			if !ok || err != nil {
				return nil, fmt.Errorf("choices[0].logprobs.tokens[%d] = %q, want token_id:<id> (return_tokens_as_token_ids)", i, tok)
			}
			ids = append(ids, id)
		}
		if resp.OutputIDs == nil {
			resp.OutputIDs = ids
		} else if len(ids) != len(resp.OutputIDs) {
			return nil, fmt.Errorf("choices[0].logprobs has %d tokens, token_ids %d", len(ids), len(resp.OutputIDs))
		}
		if req.ReturnLogprob {
			if len(lp.TokenLogprobs) != len(resp.OutputIDs) {
				return nil, fmt.Errorf("choices[0].logprobs.token_logprobs has %d entries for %d tokens", len(lp.TokenLogprobs), len(resp.OutputIDs))
			}
			for i, v := range lp.TokenLogprobs {
				if v == nil {
					return nil, fmt.Errorf("choices[0].logprobs.token_logprobs[%d] is null", i)
				}
				resp.OutputTokenLogprobs = append(resp.OutputTokenLogprobs, float32(*v))
			}
		}
	} else if req.ReturnLogprob {
		return nil, errors.New("choices[0].logprobs missing")
	}
	if resp.OutputIDs == nil {
		return nil, errors.New("no output token ids (neither choices[0].token_ids nor logprobs.tokens)")
	}
	if resp.PromptTokens == 0 {
		resp.PromptTokens = len(req.InputIDs)
	}
	if resp.CompletionTokens == 0 {
		resp.CompletionTokens = len(resp.OutputIDs)
	}
	if ch.FinishReason != nil {
		resp.FinishReason = *ch.FinishReason
	}
	var stop int
	if len(ch.StopReason) > 0 && json.Unmarshal(ch.StopReason, &stop) == nil {
		resp.MatchedStop = &stop
	}
	if req.ReturnRoutedExperts {
		r, err := decodeVLLMRouting(ch.RoutedExperts, raw.PromptRoutedExperts, resp.PromptTokens, len(resp.OutputIDs), layers, topK)
		if err != nil {
			return nil, err
		}
		if r == nil {
			resp.RoutingUnavailable = RoutingUnavailableVLLM
		} else {
			resp.RoutedExperts = r
		}
	}
	return resp, nil
}
