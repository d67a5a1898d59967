package inference

import (
	"context"
	"errors"
	"fmt"

	"github.com/t1pipe/t1/moe"
)

// SamplingParams are SGLang's sampling_params (the subset t1 uses).
type SamplingParams struct {
	// Temperature 0 samples greedily.
	Temperature float64 `json:"temperature"`
	// TopP in (0, 1]; 1 keeps the whole distribution.
	TopP         float64 `json:"top_p"`
	MaxNewTokens int     `json:"max_new_tokens"`
	// StopTokenIDs end generation; the stop token is part of the output.
	StopTokenIDs []int `json:"stop_token_ids,omitempty"`
	// Seed makes sampling reproducible (SGLang: sampling_seed; vLLM: seed).
	Seed uint64 `json:"sampling_seed"`
}

// DefaultSampling is SGLang's default: temperature 1, top_p 1, 128 tokens.
func DefaultSampling() SamplingParams {
	return SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 128}
}

// GenerateRequest is one token-in, token-out generation.
type GenerateRequest struct {
	InputIDs            []int          `json:"input_ids"`
	SamplingParams      SamplingParams `json:"sampling_params"`
	ReturnLogprob       bool           `json:"return_logprob"`
	ReturnRoutedExperts bool           `json:"return_routed_experts"`
}

// Finish reasons.
const (
	FinishStop   = "stop"
	FinishLength = "length"
	FinishAbort  = "abort"
)

// GenerateResponse is what every backend returns.
type GenerateResponse struct {
	OutputIDs []int `json:"output_ids"`
	// OutputTokenLogprobs[i] is the log-prob of OutputIDs[i] under the
	// distribution it was sampled from; nil unless requested.
	OutputTokenLogprobs []float32 `json:"output_token_logprobs,omitempty"`
	// RoutedExperts is [prompt+completion−1, layers, top_k]; nil unless
	// requested and available.
	RoutedExperts *moe.Routing `json:"routed_experts,omitempty"`
	// RoutingUnavailable says why routing was requested but not returned
	// (e.g. a vLLM server); empty otherwise.
	RoutingUnavailable string `json:"routing_unavailable,omitempty"`
	FinishReason       string `json:"finish_reason"`
	// MatchedStop is the stop token that ended generation, if any.
	MatchedStop      *int   `json:"matched_stop,omitempty"`
	PromptTokens     int    `json:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
	WeightVersion    string `json:"weight_version,omitempty"`
}

// Engine generates tokens. Implementations are safe for concurrent use.
type Engine interface {
	Generate(ctx context.Context, req GenerateRequest) (*GenerateResponse, error)
}

// ErrBadRequest marks errors caused by the request itself (HTTP 400).
var ErrBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}
