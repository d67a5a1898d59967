package inference

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/t1pipe/t1/infra/chat"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/tokenizer"
)

// Server exposes an Engine over HTTP in SGLang's native format:
//
//	POST /generate        one request (input_ids, not a batch, not streamed)
//	POST /v1/chat/completions  OpenAI's chat format, not streamed (reference engine only)
//	GET  /health          200 when serving
//	GET  /get_model_info  model path, weight version, and t1's model shape
type Server struct {
	eng       Engine
	modelPath atomic.Pointer[string]
	log       *slog.Logger
	reqs      atomic.Uint64
	load      func(ctx context.Context, ref string) (*moe.Checkpoint, error)
}

// EnableWeightUpdates turns on POST /update_weights_from_disk, SGLang's
// endpoint for loading new weights: {"model_path": ref, "weight_version":
// v} loads ref with load and swaps it into the Reference engine; requests
// already running finish on the old weights. The version defaults to the
// checkpoint's policy_version.
func (s *Server) EnableWeightUpdates(load func(ctx context.Context, ref string) (*moe.Checkpoint, error)) {
	s.load = load
}

// NewServer serves eng. modelPath names the model in /get_model_info; log
// may be nil.
func NewServer(eng Engine, modelPath string, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{eng: eng, log: log}
	s.modelPath.Store(&modelPath)
	return s
}

// maxBody bounds a request body (a 2048-token prompt is ~12 KB).
const maxBody = 8 << 20

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/generate":
		if r.Method != http.MethodPost {
			httpError(w, http.StatusMethodNotAllowed, "use POST for /generate")
			return
		}
		s.generate(w, r)
	case chat.Path:
		if r.Method != http.MethodPost {
			httpError(w, http.StatusMethodNotAllowed, "use POST for "+chat.Path)
			return
		}
		s.chatCompletion(w, r)
	case "/update_weights_from_disk":
		if r.Method != http.MethodPost {
			httpError(w, http.StatusMethodNotAllowed, "use POST for /update_weights_from_disk")
			return
		}
		s.updateWeights(w, r)
	case "/health":
		w.WriteHeader(http.StatusOK)
	case "/get_model_info":
		s.modelInfo(w)
	default:
		httpError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s", r.URL.Path))
	}
}

type updateRequest struct {
	ModelPath     string `json:"model_path"`
	WeightVersion string `json:"weight_version"`
}

type updateResponse struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
}

func (s *Server) updateWeights(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.eng.(*Reference)
	if s.load == nil || !ok {
		writeJSON(w, http.StatusBadRequest, updateResponse{Message: "weight updates are not enabled on this server"})
		return
	}
	var req updateRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil || req.ModelPath == "" {
		writeJSON(w, http.StatusBadRequest, updateResponse{Message: fmt.Sprintf("want {\"model_path\": …, \"weight_version\": …}: %v", err)})
		return
	}
	ck, err := s.load(r.Context(), req.ModelPath)
	if err != nil {
		s.log.Warn("weight update failed", "model_path", req.ModelPath, "err", err)
		writeJSON(w, http.StatusBadRequest, updateResponse{Message: err.Error()})
		return
	}
	version := req.WeightVersion
	if version == "" {
		version = ck.Meta["policy_version"]
	}
	ref.SetPolicy(ck.Model, ck.Tokenizer, version)
	s.modelPath.Store(&req.ModelPath)
	s.log.Info("weights updated", "model_path", req.ModelPath, "weight_version", version)
	writeJSON(w, http.StatusOK, updateResponse{Success: true, Message: "loaded " + req.ModelPath + " as weight version " + version})
}

func (s *Server) modelInfo(w http.ResponseWriter) {
	info := map[string]any{"model_path": *s.modelPath.Load(), "is_generation": true}
	if ref, ok := s.eng.(*Reference); ok {
		info["weight_version"] = ref.WeightVersion()
		info["t1_model_config"] = ref.Config()
		info["t1_serving_precision"] = ref.Precision().String()
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) generate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		httpError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	if len(body) > maxBody {
		httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body exceeds %d bytes", maxBody))
		return
	}
	// Missing sampling fields take SGLang's defaults.
	req := sglRequest{SamplingParams: DefaultSampling()}
	if err := json.Unmarshal(body, &req); err != nil {
		msg := err.Error()
		if strings.Contains(msg, "[]int") || strings.Contains(msg, "input_ids") {
			msg = "input_ids must be one list of token ids (batches are not supported): " + msg
		}
		httpError(w, http.StatusBadRequest, msg)
		return
	}
	switch {
	case req.Stream:
		httpError(w, http.StatusBadRequest, "stream: streaming is not supported")
		return
	case req.Text != nil:
		httpError(w, http.StatusBadRequest, "text: this server takes input_ids only (token in, token out)")
		return
	case len(req.InputIDs) == 0:
		httpError(w, http.StatusBadRequest, "input_ids: required and non-empty")
		return
	}
	greq := GenerateRequest{InputIDs: req.InputIDs, SamplingParams: req.SamplingParams, ReturnLogprob: req.ReturnLogprob, ReturnRoutedExperts: req.ReturnRoutedExperts}
	resp, err := s.eng.Generate(r.Context(), greq)
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, ErrBadRequest) {
			code = http.StatusBadRequest
		}
		s.log.Warn("generate failed", "err", err, "status", code)
		httpError(w, code, err.Error())
		return
	}
	id := s.reqs.Add(1)
	out := toSGLang(resp, fmt.Sprintf("t1-%d", id), s.tokenizer())
	writeJSON(w, http.StatusOK, out)
	s.log.Debug("generate", "prompt_tokens", resp.PromptTokens, "completion_tokens", resp.CompletionTokens, "finish", resp.FinishReason, "elapsed", time.Since(start))
}

func (s *Server) tokenizer() tokenizer.Tokenizer {
	if ref, ok := s.eng.(*Reference); ok {
		return ref.Tokenizer()
	}
	return nil
}

// toSGLang renders a response as SGLang's /generate answer.
func toSGLang(resp *GenerateResponse, id string, tok tokenizer.Tokenizer) sglResponse {
	text := func(ids ...int) (string, bool) {
		if tok == nil {
			return "", false
		}
		s, err := tok.Decode(ids)
		return s, err == nil
	}
	out := sglResponse{OutputIDs: resp.OutputIDs, MetaInfo: sglMeta{ID: id, PromptTokens: resp.PromptTokens,
		CompletionTokens: resp.CompletionTokens, WeightVersion: resp.WeightVersion}}
	if out.OutputIDs == nil {
		out.OutputIDs = []int{}
	}
	out.Text, _ = text(resp.OutputIDs...)
	f := &sglFinish{Type: resp.FinishReason}
	if resp.FinishReason == FinishLength {
		f.Length = resp.CompletionTokens
	}
	if resp.MatchedStop != nil {
		f.Matched = *resp.MatchedStop
	}
	out.MetaInfo.FinishReason = f
	if resp.OutputTokenLogprobs != nil {
		out.MetaInfo.OutputTokenLogprobs = []json.RawMessage{}
		for i, lp := range resp.OutputTokenLogprobs {
			var t any
			if s, ok := text(resp.OutputIDs[i]); ok {
				t = s
			}
			b, _ := json.Marshal([]any{float64(lp), resp.OutputIDs[i], t})
			out.MetaInfo.OutputTokenLogprobs = append(out.MetaInfo.OutputTokenLogprobs, b)
		}
	}
	if r := resp.RoutedExperts; r != nil {
		s := EncodeRoutedExperts(*r)
		out.MetaInfo.RoutedExperts = &s
		out.MetaInfo.RoutedExpertsShape = []int{r.Tokens, r.Layers, r.TopK}
	}
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// httpError answers {"error":{"message":…,"code":…}}, SGLang's error shape.
func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "code": code}})
}

// ListenAndServe serves h on addr until ctx ends, then shuts down
// gracefully. ready, if not nil, is called with the bound address (useful
// with port 0).
func ListenAndServe(ctx context.Context, addr string, h http.Handler, ready func(addr string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("inference server: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		ready(ln.Addr().String())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("inference server: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("inference server: shutdown: %w", err)
		}
		return nil
	}
}
