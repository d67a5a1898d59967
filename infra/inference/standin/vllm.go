package standin

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/t1pipe/t1/moe"
)

// vLLM versions the stand-in speaks.
const (
	VLLM021 = "0.21.0"
	VLLM034 = "0.34.0"
)

// VLLMOptions are the server's version and flags.
type VLLMOptions struct {
	// Version is VLLM021 or VLLM034.
	Version string
	// LogprobsMode is --logprobs-mode: "" or raw_logprobs (the default),
	// or processed_logprobs.
	LogprobsMode string
	// ReturnRoutedExperts is --enable-return-routed-experts.
	ReturnRoutedExperts bool
	// ServedModelName is --served-model-name: a request naming another
	// model is answered 404 (OpenAIServing._check_model: "The model `m`
	// does not exist.", NotFoundError); one naming none gets the default.
	ServedModelName string
	// NoDevMode is a server started without VLLM_SERVER_DEV_MODE=1: the
	// dev endpoints (/collective_rpc, /reset_prefix_cache) are not routed
	// (vllm/entrypoints/serve/dev registers them only in dev mode).
	NoDevMode bool
	// Load reads weights for reload_weights; nil: LoadDir.
	Load Loader
}

// VLLM stands in for a vLLM server started with VLLM_SERVER_DEV_MODE=1.
type VLLM struct {
	opt     VLLMOptions
	eng     *engine
	reloads atomic.Int64
	resets  atomic.Int64
	// stale: weights were reloaded and the prefix cache not reset since.
	stale atomic.Bool
}

// NewVLLM serves m.
func NewVLLM(m *moe.Model, opt VLLMOptions) *VLLM {
	if opt.Version == "" {
		opt.Version = VLLM034
	}
	return &VLLM{opt: opt, eng: newEngine(m, opt.Load)}
}

// Restart simulates an engine restart: the initial weights and an empty
// prefix cache.
func (s *VLLM) Restart() {
	s.eng.restart()
	s.stale.Store(false)
}

// WeightVersion is the served weight version ("default" until one is set).
func (s *VLLM) WeightVersion() string {
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	return s.eng.version
}

// Reloads counts reload_weights calls; Resets counts /reset_prefix_cache.
func (s *VLLM) Reloads() int { return int(s.reloads.Load()) }

// Resets counts /reset_prefix_cache calls.
func (s *VLLM) Resets() int { return int(s.resets.Load()) }

// CacheStale reports weights reloaded with the prefix cache not reset
// since: the server would serve cached KV of the old weights.
func (s *VLLM) CacheStale() bool { return s.stale.Load() }

// vllmError is vLLM's error body (entrypoints/openai/protocol.py
// ErrorResponse): {"error": {"message", "type", "param", "code"}}.
func vllmError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": status}})
}

func (s *VLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	dev := r.URL.Path == "/collective_rpc" || r.URL.Path == "/reset_prefix_cache" || r.URL.Path == "/update_weight_version" || r.URL.Path == "/weight_info"
	switch {
	case dev && s.opt.NoDevMode:
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	case r.URL.Path == "/v1/completions" && r.Method == http.MethodPost:
		s.completions(w, r)
	case r.URL.Path == "/collective_rpc" && r.Method == http.MethodPost:
		s.collectiveRPC(w, r)
	case r.URL.Path == "/reset_prefix_cache" && r.Method == http.MethodPost:
		s.resets.Add(1)
		s.stale.Store(false)
		if s.opt.Version == VLLM021 {
			w.WriteHeader(http.StatusOK) // 0.21.0: always an empty 200
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"success": true}) // 0.34.0
	case r.URL.Path == "/version" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"version": s.opt.Version})
	case r.URL.Path == "/weight_info" && r.Method == http.MethodGet && s.opt.Version == VLLM034:
		_, v := s.eng.snapshot()
		writeJSON(w, http.StatusOK, map[string]string{"weight_version": v})
	case r.URL.Path == "/update_weight_version" && r.Method == http.MethodPost && s.opt.Version == VLLM034:
		// The RL dev router: Body(embed=True) new_version, answered
		// {"success": true, "new_version"}; a missing field is FastAPI's 422.
		var req struct {
			NewVersion *string `json:"new_version"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.NewVersion == nil {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []map[string]any{{"type": "missing", "loc": []string{"body", "new_version"}, "msg": "Field required"}}})
			return
		}
		s.eng.mu.Lock()
		s.eng.version = *req.NewVersion
		s.eng.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "new_version": *req.NewVersion})
	case r.URL.Path == "/health" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusOK)
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	}
}

// collectiveRPC is the dev endpoint POST /collective_rpc
// (vllm/entrypoints/serve/dev): missing method 400; an empty 200 when the
// workers return None.
func (s *VLLM) collectiveRPC(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Method string         `json:"method"`
		Args   []any          `json:"args"`
		Kwargs map[string]any `json:"kwargs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Method == "" {
		vllmError(w, http.StatusBadRequest, "BadRequestError", "Missing 'method' in request body")
		return
	}
	if req.Method != "reload_weights" {
		vllmError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("the stand-in knows only reload_weights, not %q", req.Method))
		return
	}
	path, _ := req.Kwargs["weights_path"].(string)
	m, err := s.eng.load(path)
	if err != nil {
		vllmError(w, http.StatusInternalServerError, "InternalServerError", err.Error())
		return
	}
	s.eng.mu.Lock()
	s.eng.cur = newPolicy(m, path)
	s.eng.mu.Unlock()
	s.reloads.Add(1)
	// reload_weights does not reset the prefix cache.
	s.stale.Store(true)
	w.WriteHeader(http.StatusOK)
}

func (s *VLLM) completions(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model                  string       `json:"model"`
		Prompt                 []int        `json:"prompt"`
		MaxTokens              *int         `json:"max_tokens"`
		Temperature            *float64     `json:"temperature"`
		TopP                   *float64     `json:"top_p"`
		Seed                   *json.Number `json:"seed"`
		StopTokenIDs           []int        `json:"stop_token_ids"`
		Logprobs               *int         `json:"logprobs"`
		ReturnTokensAsTokenIDs bool         `json:"return_tokens_as_token_ids"`
		ReturnTokenIDs         bool         `json:"return_token_ids"`
		RoutedExpertsStart     *int         `json:"routed_experts_prompt_start"`
	}
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	// Unknown request fields are ignored (protocol.py).
	if err := dec.Decode(&req); err != nil {
		vllmError(w, http.StatusBadRequest, "Bad Request", err.Error())
		return
	}
	if n := s.opt.ServedModelName; n != "" && req.Model != "" && req.Model != n {
		vllmError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	// protocol.py CompletionRequest: seed Field(ge=-(2**63), le=2**63-1);
	// pydantic's failure is a 400 of type "Bad Request".
	sp := moe.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 16, StopTokenIDs: req.StopTokenIDs, Seed: randomSeed()}
	if req.Seed != nil {
		v, ok, err := int64Of(*req.Seed)
		if err != nil || !ok {
			msg := "Input should be less than or equal to 9223372036854775807"
			if strings.HasPrefix(req.Seed.String(), "-") {
				msg = "Input should be greater than or equal to -9223372036854775808"
			}
			vllmError(w, http.StatusBadRequest, "Bad Request", fmt.Sprintf("1 validation error:\n  {'type': '%s', 'loc': ('body', 'seed'), 'msg': '%s', 'input': %s}",
				map[bool]string{true: "greater_than_equal", false: "less_than_equal"}[strings.HasPrefix(req.Seed.String(), "-")], msg, req.Seed.String()))
			return
		}
		sp.Seed = uint64(v)
	}
	if req.MaxTokens != nil {
		sp.MaxNewTokens = *req.MaxTokens
	}
	if req.Temperature != nil {
		sp.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		sp.TopP = *req.TopP
	}
	if len(req.Prompt) == 0 {
		vllmError(w, http.StatusBadRequest, "BadRequestError", "Prompt cannot be empty")
		return
	}
	start := 0
	if req.RoutedExpertsStart != nil && s.opt.Version == VLLM034 {
		start = *req.RoutedExpertsStart
		if start < 0 || start > len(req.Prompt) {
			vllmError(w, http.StatusBadRequest, "Bad Request", fmt.Sprintf("routed_experts_prompt_start %d outside [0, %d]", start, len(req.Prompt)))
			return
		}
	}
	p, _ := s.eng.snapshot()
	g, err := p.generate(r.Context(), req.Prompt, sp)
	if err != nil {
		vllmError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	ch := map[string]any{"index": 0, "text": "", "finish_reason": g.finish, "stop_reason": nil}
	if g.finish == moe.FinishStop {
		ch["stop_reason"] = g.matched
	}
	if req.ReturnTokenIDs {
		ch["token_ids"] = g.out
		ch["prompt_token_ids"] = req.Prompt
	}
	if req.Logprobs != nil {
		// --logprobs-mode (vllm/config/model.py): raw_logprobs, the
		// default, is before any processor (temperature, top-p);
		// processed_logprobs after all of them. Clamped at -9999.
		src := g.raw
		if s.opt.LogprobsMode == "processed_logprobs" {
			src = g.processed
		}
		toks := make([]string, len(g.out))
		lps := make([]float64, len(g.out))
		for i, id := range g.out {
			if req.ReturnTokensAsTokenIDs {
				toks[i] = fmt.Sprintf("token_id:%d", id)
			} else {
				toks[i] = fmt.Sprintf("<%d>", id)
			}
			lps[i] = math.Max(float64(src[i]), -9999.0)
		}
		ch["logprobs"] = map[string]any{"tokens": toks, "token_logprobs": lps, "text_offset": make([]int, len(g.out)),
			"top_logprobs": make([]any, len(g.out))}
	}
	resp := map[string]any{"id": "cmpl-standin", "object": "text_completion", "model": req.Model, "choices": []any{ch},
		"usage": map[string]int{"prompt_tokens": len(req.Prompt), "completion_tokens": len(g.out), "total_tokens": len(req.Prompt) + len(g.out)}}
	if s.opt.ReturnRoutedExperts {
		n := len(req.Prompt)
		rt := g.routing
		switch s.opt.Version {
		case VLLM021:
			// 0.21.0 serving_completion.py: per choice the generated part
			// [gen−1, L, K], response-level prompt_routed_experts
			// [prompt, L, K], both nested lists.
			ch["routed_experts"] = nested(rt.Slice(min(n, rt.Tokens), rt.Tokens))
			resp["prompt_routed_experts"] = nested(rt.Slice(0, min(n, rt.Tokens)))
		default:
			// 0.34.0: base64 of np.save bytes, (num_tokens−1−start, L, K),
			// uint8 when num_experts <= 256.
			ch["routed_experts"] = base64.StdEncoding.EncodeToString(npy(rt.Slice(start, rt.Tokens), p.m.Cfg.Experts))
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func nested(r moe.Routing) [][][]int32 {
	out := make([][][]int32, r.Tokens)
	for t := range out {
		out[t] = make([][]int32, r.Layers)
		for l := range out[t] {
			out[t][l] = r.At(t, l)
		}
	}
	return out
}

// npy is np.save of r (format 1.0), dtype uint8 for <= 256 experts, else
// uint16.
func npy(r moe.Routing, experts int) []byte {
	descr, size := "|u1", 1
	if experts > 256 {
		descr, size = "<u2", 2
	}
	hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d, %d), }", descr, r.Tokens, r.Layers, r.TopK)
	// magic(6) + version(2) + len(2) + header, padded with spaces and a
	// newline to a multiple of 64.
	pad := 64 - (10+len(hdr)+1)%64
	if pad == 64 {
		pad = 0
	}
	hdr += strings.Repeat(" ", pad) + "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	_ = binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	b.WriteString(hdr)
	for _, e := range r.Experts {
		if size == 1 {
			b.WriteByte(byte(e))
		} else {
			_ = binary.Write(&b, binary.LittleEndian, uint16(e))
		}
	}
	return b.Bytes()
}
