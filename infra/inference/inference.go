package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

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
	// It crosses the wire as the int64 of the same 64 bits (WireSeed):
	// both servers bound it to [-2**63, 2**63-1] (SGLang 0.5.23,
	// python/sglang/srt/sampling/sampling_params.py; vLLM 0.21.0 and
	// 0.34.0, vllm/entrypoints/openai/completion/protocol.py) and answer
	// 400 above. SGLang uses it only when started with
	// --enable-deterministic-inference.
	Seed uint64 `json:"-"`
}

// WireSeed is seed as the servers take it: the int64 with the same bits,
// so distinct seeds stay distinct and every one is within int64.
func WireSeed(seed uint64) int64 { return int64(seed) }

// samplingWire is SamplingParams on the wire: sampling_seed an int64.
type samplingWire struct {
	Temperature  float64 `json:"temperature"`
	TopP         float64 `json:"top_p"`
	MaxNewTokens int     `json:"max_new_tokens"`
	StopTokenIDs []int   `json:"stop_token_ids,omitempty"`
	SamplingSeed int64   `json:"sampling_seed"`
}

// MarshalJSON writes SGLang's sampling_params, the seed within int64.
func (p SamplingParams) MarshalJSON() ([]byte, error) {
	return json.Marshal(samplingWire{Temperature: p.Temperature, TopP: p.TopP, MaxNewTokens: p.MaxNewTokens, StopTokenIDs: p.StopTokenIDs,
		SamplingSeed: WireSeed(p.Seed)})
}

// UnmarshalJSON reads sampling_params, keeping p's values for missing
// fields; sampling_seed may be an int64 (as t1 sends it) or, from older
// clients, a uint64.
func (p *SamplingParams) UnmarshalJSON(b []byte) error {
	w := struct {
		Temperature  *float64     `json:"temperature"`
		TopP         *float64     `json:"top_p"`
		MaxNewTokens *int         `json:"max_new_tokens"`
		StopTokenIDs []int        `json:"stop_token_ids"`
		SamplingSeed *json.Number `json:"sampling_seed"`
	}{Temperature: &p.Temperature, TopP: &p.TopP, MaxNewTokens: &p.MaxNewTokens, StopTokenIDs: p.StopTokenIDs}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p.StopTokenIDs = w.StopTokenIDs
	if w.SamplingSeed != nil {
		s := w.SamplingSeed.String()
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			p.Seed = uint64(v)
		} else if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			p.Seed = u
		} else {
			return fmt.Errorf("sampling_seed %s is not a 64-bit integer", s)
		}
	}
	return nil
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

// ErrUnavailable marks errors of an engine that did not answer: refused
// or cut connections, timeouts, 5xx. The same request may succeed on
// another engine, or on this one once it is back.
var ErrUnavailable = errors.New("engine unavailable")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}
