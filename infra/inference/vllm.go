package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// VLLMOptions configure a vLLM client.
type VLLMOptions struct {
	// URL is the server's base URL (without /v1), e.g. http://127.0.0.1:8000.
	URL string
	// Model is the served model name the completions API wants.
	Model   string
	Timeout time.Duration
	// Layers and TopK reshape routing if a server returns it as a flat
	// base64 array (as SGLang does).
	Layers, TopK int
	Client       *http.Client
}

// VLLM is a client of vLLM's OpenAI-compatible completions API with a
// token-id prompt. vLLM's completions API does not return routed experts;
// a request for them gets RoutingUnavailable set, unless the server adds a
// routed_experts field to the choice (some forks do), which is decoded as
// SGLang's.
type VLLM struct {
	opt VLLMOptions
	hc  *http.Client
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
	return &VLLM{opt: opt, hc: hc}, nil
}

type vllmRequest struct {
	Model       string  `json:"model,omitempty"`
	Prompt      []int   `json:"prompt"`
	MaxTokens   int     `json:"max_tokens"`
	Temperature float64 `json:"temperature"`
	TopP        float64 `json:"top_p"`
	Seed        uint64  `json:"seed"`
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
}

type vllmResponse struct {
	Choices []struct {
		TokenIDs []int `json:"token_ids"`
		Logprobs *struct {
			Tokens        []string   `json:"tokens"`
			TokenLogprobs []*float64 `json:"token_logprobs"`
		} `json:"logprobs"`
		FinishReason  *string         `json:"finish_reason"`
		StopReason    json.RawMessage `json:"stop_reason"`
		RoutedExperts *string         `json:"routed_experts"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// RoutingUnavailableVLLM is the marker set when routing was asked of vLLM.
const RoutingUnavailableVLLM = "vllm: the completions API does not return routed experts; use the sglang or reference backend for routing replay"

// Generate implements Engine with POST /v1/completions.
func (c *VLLM) Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error) {
	if len(req.InputIDs) == 0 {
		return nil, badRequest("vllm: input_ids is empty")
	}
	sp := req.SamplingParams
	zero := 0
	body, err := json.Marshal(vllmRequest{Model: c.opt.Model, Prompt: req.InputIDs, MaxTokens: sp.MaxNewTokens, Temperature: sp.Temperature,
		TopP: sp.TopP, Seed: sp.Seed, StopTokenIDs: sp.StopTokenIDs, Logprobs: &zero, ReturnTokensAsTokenIDs: true,
		ReturnTokenIDs: true, IncludeStopStrInOut: true})
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
		if ch.RoutedExperts == nil {
			resp.RoutingUnavailable = RoutingUnavailableVLLM
		} else {
			r, err := DecodeRoutedExperts(*ch.RoutedExperts, resp.PromptTokens+len(resp.OutputIDs)-1, layers, topK)
			if err != nil {
				return nil, fmt.Errorf("choices[0].%w", err)
			}
			resp.RoutedExperts = &r
		}
	}
	return resp, nil
}
