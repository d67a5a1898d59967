package standin

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/t1pipe/t1/moe"
)

// SGLangOptions are the server flags the stand-in honours.
type SGLangOptions struct {
	// ReturnRoutedExperts is --enable-return-routed-experts.
	ReturnRoutedExperts bool
	// Deterministic is --enable-deterministic-inference: only then is
	// sampling_seed used.
	Deterministic bool
	// Load reads a checkpoint for /update_weights_from_disk; nil: LoadDir.
	Load Loader
}

// SGLang stands in for an SGLang 0.5.23 server.
type SGLang struct {
	opt   SGLangOptions
	eng   *engine
	ids   atomic.Uint64
	loads atomic.Int64
}

// NewSGLang serves m as a freshly started server would (weight version
// "default").
func NewSGLang(m *moe.Model, opt SGLangOptions) *SGLang {
	return &SGLang{opt: opt, eng: newEngine(m, opt.Load)}
}

// Restart simulates an engine restart: the initial weights, weight version
// "default" again.
func (s *SGLang) Restart() { s.eng.restart() }

// Loads counts the successful /update_weights_from_disk calls.
func (s *SGLang) Loads() int { return int(s.loads.Load()) }

// WeightVersion is the served version.
func (s *SGLang) WeightVersion() string {
	_, v := s.eng.snapshot()
	return v
}

// sglSamplingKeys are the fields of SamplingParams (SGLang 0.5.23,
// python/sglang/srt/sampling/sampling_params.py) that t1 may send plus
// the rest of the documented ones; anything else is rejected by the
// /generate schema check (sglang/api/v1/api_types.py).
var sglSamplingKeys = []string{"max_new_tokens", "stop", "stop_token_ids", "temperature", "top_p", "top_k", "min_p", "frequency_penalty",
	"presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex", "ebnf", "structural_tag", "ignore_eos",
	"skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim", "custom_params", "stream_interval", "logit_bias", "sampling_seed"}

func (s *SGLang) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/generate" && r.Method == http.MethodPost:
		s.generate(w, r)
	case r.URL.Path == "/update_weights_from_disk" && r.Method == http.MethodPost:
		s.update(w, r)
	case r.URL.Path == "/model_info" && r.Method == http.MethodGet:
		// SGLang 0.5.23 http_server.py GET /model_info. There is no
		// /get_weight_version route (404 below).
		p, v := s.eng.snapshot()
		writeJSON(w, http.StatusOK, map[string]any{"weight_version": v, "model_path": p.path, "served_model_name": "standin",
			"tokenizer_path": p.path, "is_generation": true})
	case r.URL.Path == "/health" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusOK)
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	}
}

// sglError400 is the schema check's answer (sglang/api/v1/api_types.py):
// 400 {"error": "<string>"}.
func sglSchemaError(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": msg})
}

// sglValueError is a ValueError raised while handling the request
// (SGLang 0.5.23 http_server.py): 400 {"error": {"message": "<str>"}}.
func sglValueError(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"message": msg}})
}

func (s *SGLang) generate(w http.ResponseWriter, r *http.Request) {
	var req map[string]json.RawMessage
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		sglSchemaError(w, "invalid JSON: "+err.Error())
		return
	}
	// Unknown top-level keys are ignored (io_struct.py GenerateReqInput).
	var input []int
	if raw, ok := req["input_ids"]; ok {
		if err := json.Unmarshal(raw, &input); err != nil {
			sglSchemaError(w, "input_ids: "+err.Error())
			return
		}
	} else if _, ok := req["text"]; ok {
		sglValueError(w, "the stand-in has no tokenizer: send input_ids")
		return
	}
	if len(input) == 0 {
		// io_struct.py GenerateReqInput normalisation.
		sglValueError(w, "input_ids cannot be empty.")
		return
	}
	sp := moe.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 128}
	var seed *json.Number
	if raw, ok := req["sampling_params"]; ok {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			sglSchemaError(w, "sampling_params: "+err.Error())
			return
		}
		for k := range m {
			if !slices.Contains(sglSamplingKeys, k) {
				sglSchemaError(w, fmt.Sprintf("unknown field `%s`, expected one of `%s`", k, strings.Join(sglSamplingKeys, "`, `")))
				return
			}
		}
		for k, dst := range map[string]any{"temperature": &sp.Temperature, "top_p": &sp.TopP, "max_new_tokens": &sp.MaxNewTokens,
			"stop_token_ids": &sp.StopTokenIDs} {
			if v, ok := m[k]; ok && string(v) != "null" {
				if err := json.Unmarshal(v, dst); err != nil {
					sglSchemaError(w, fmt.Sprintf("sampling_params.%s: %v", k, err))
					return
				}
			}
		}
		if v, ok := m["sampling_seed"]; ok && string(v) != "null" {
			d := json.NewDecoder(bytes.NewReader(v))
			d.UseNumber()
			var n json.Number
			if err := d.Decode(&n); err != nil {
				sglSchemaError(w, "sampling_params.sampling_seed: "+err.Error())
				return
			}
			seed = &n
		}
	}
	// sampling_params.py verify(): the seed's range is checked whether or
	// not it is used.
	var seedV int64 = 42 // sampling_batch_info.py: default seed under deterministic inference
	if seed != nil {
		v, ok, err := int64Of(*seed)
		if err != nil || !ok {
			sglValueError(w, fmt.Sprintf("sampling_seed must be in [-2**63, 2**63 - 1], got %s", seed.String()))
			return
		}
		seedV = v
	}
	if sp.Temperature < 1e-6 {
		sp.Temperature = 0 // temperature < eps: greedy
	}
	if s.opt.Deterministic {
		sp.Seed = uint64(seedV)
	} else {
		sp.Seed = randomSeed() // sampling_batch_info.py: no seed without the flag
	}
	var returnLogprob, returnRouted bool
	startLen := 0
	for k, dst := range map[string]any{"return_logprob": &returnLogprob, "return_routed_experts": &returnRouted,
		"routed_experts_start_len": &startLen} {
		if v, ok := req[k]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, dst); err != nil {
				sglSchemaError(w, fmt.Sprintf("%s: %v", k, err))
				return
			}
		}
	}
	if stream, ok := req["stream"]; ok && string(stream) == "true" {
		sglValueError(w, "the stand-in does not stream")
		return
	}
	p, version := s.eng.snapshot()
	id := fmt.Sprintf("%032x", s.ids.Add(1))
	if startLen < 0 || startLen > len(input) {
		// tokenizer_manager.py: the request aborts with status 400.
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]string{"message": fmt.Sprintf(
			"routed_experts_start_len %d must be in [0, %d]", startLen, len(input))}})
		return
	}
	g, err := p.generate(r.Context(), input, sp)
	if err != nil {
		// The stand-in's own choice for what the real server leaves to
		// the model runner (e.g. an id outside the vocabulary).
		sglValueError(w, err.Error())
		return
	}
	meta := map[string]any{"id": id, "prompt_tokens": len(input), "completion_tokens": len(g.out), "cached_tokens": 0,
		"num_retractions": 0, "weight_version": version,
		"weight_versions": []map[string]any{{"version": version, "start": 0, "end": len(g.out)}}}
	if g.finish == moe.FinishStop {
		meta["finish_reason"] = map[string]any{"type": "stop", "matched": g.matched}
	} else {
		meta["finish_reason"] = map[string]any{"type": "length", "length": len(g.out)}
	}
	if returnLogprob {
		lps := make([][]any, len(g.out))
		for i, tok := range g.out {
			// sampler.py: after temperature, before top-k/top-p; greedy
			// gives the plain log_softmax.
			lps[i] = []any{g.tempered[i], tok, nil}
		}
		meta["output_token_logprobs"] = lps
		meta["input_token_logprobs"] = [][]any{}
	}
	if returnRouted && s.opt.ReturnRoutedExperts {
		// Raw little-endian int32, no header, no shape; rows from
		// routed_experts_start_len (tokenizer_manager.py).
		rt := g.routing.Slice(startLen, g.routing.Tokens)
		b := make([]byte, 0, 4*len(rt.Experts))
		for _, e := range rt.Experts {
			b = binary.LittleEndian.AppendUint32(b, uint32(e))
		}
		meta["routed_experts"] = base64.StdEncoding.EncodeToString(b)
	}
	writeJSON(w, http.StatusOK, map[string]any{"text": "", "output_ids": g.out, "meta_info": meta})
}

// update is POST /update_weights_from_disk (io_struct.py
// UpdateWeightFromDiskReqInput; tokenizer_manager.py's answer).
func (s *SGLang) update(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ModelPath     *string `json:"model_path"`
		WeightVersion *string `json:"weight_version"`
		LoadFormat    *string `json:"load_format"`
		FlushCache    *bool   `json:"flush_cache"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ModelPath == nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"object": "error", "message": "model_path: Field required",
			"type": "Bad Request", "param": nil, "code": 400})
		return
	}
	m, err := s.eng.load(*req.ModelPath)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"success": false,
			"message": fmt.Sprintf("Failed to update weights: %v.\nRolling back to original weights.", err), "num_paused_requests": 0})
		return
	}
	s.eng.mu.Lock()
	s.eng.cur = newPolicy(m, *req.ModelPath)
	msg := "Succeeded to update model weights."
	if req.WeightVersion != nil {
		s.eng.version = *req.WeightVersion
		msg += fmt.Sprintf(" Weight version updated to %s.", *req.WeightVersion)
	}
	s.eng.mu.Unlock()
	s.loads.Add(1)
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": msg, "num_paused_requests": 0})
}
