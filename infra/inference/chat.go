package inference

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/t1pipe/t1/infra/chat"
	"github.com/t1pipe/t1/moe"
)

// chatCompletion answers POST /v1/chat/completions (OpenAI's format, not
// streamed) from a Reference engine: the messages rendered by the
// reference model's chat template (moe.Chat, the harness's own: content is
// ordinary text, so a message cannot forge a turn) and an opening assistant
// turn, of which only the last tokens that leave room for max_tokens are
// kept. Sampling stops at the turn's end token; the completion is the
// decoded text before it.
func (s *Server) chatCompletion(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.eng.(*Reference)
	if s.tokenizer() == nil || !ok {
		httpError(w, http.StatusNotImplemented, "chat completions need the reference engine's tokenizer")
		return
	}
	tok, ok := s.tokenizer().(*moe.Tokenizer)
	if !ok {
		httpError(w, http.StatusNotImplemented, "chat completions render with t1's own template and tokenizer; this model's tokenizer is a Hugging Face one: use /generate with ids its chat template renders")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("reading the body (at most %d bytes): %v", maxBody, err))
		return
	}
	req := chat.Request{Temperature: 1}
	if err := json.Unmarshal(body, &req); err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	switch {
	case req.Stream:
		httpError(w, http.StatusBadRequest, "stream: streaming is not supported")
		return
	case len(req.Messages) == 0:
		httpError(w, http.StatusBadRequest, "messages: required and non-empty")
		return
	case req.Temperature < 0 || req.MaxTokens < 0:
		httpError(w, http.StatusBadRequest, "temperature and max_tokens must not be negative")
		return
	}
	tmpl, err := moe.NewChat(tok)
	if err != nil {
		httpError(w, http.StatusNotImplemented, err.Error())
		return
	}
	msgs := make([]moe.Message, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = moe.Message{Role: m.Role, Content: m.Content}
	}
	ids, err := tmpl.Render(msgs)
	if err != nil {
		httpError(w, http.StatusBadRequest, "messages: "+err.Error())
		return
	}
	ctxLen := ref.Config().Context
	maxNew := req.MaxTokens
	if maxNew == 0 {
		maxNew = DefaultSampling().MaxNewTokens
	}
	maxNew = min(maxNew, ctxLen/2)
	if keep := ctxLen - maxNew; len(ids) > keep {
		ids = ids[len(ids)-keep:]
	}
	resp, err := s.eng.Generate(r.Context(), GenerateRequest{InputIDs: ids,
		SamplingParams: SamplingParams{Temperature: req.Temperature, TopP: 1, MaxNewTokens: maxNew, StopTokenIDs: []int{tmpl.End()}, Seed: uint64(req.Seed)}})
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, ErrBadRequest) {
			code = http.StatusBadRequest
		}
		httpError(w, code, err.Error())
		return
	}
	out, _ := tok.Decode(tmpl.Reply(resp.OutputIDs))
	model := req.Model
	if model == "" {
		model = *s.modelPath.Load()
	}
	writeJSON(w, http.StatusOK, chat.Response{
		ID: fmt.Sprintf("chatcmpl-t1-%d", s.reqs.Add(1)), Object: "chat.completion", Created: time.Now().Unix(), Model: model,
		Choices: []chat.Choice{{Message: chat.Message{Role: "assistant", Content: out}, FinishReason: resp.FinishReason}},
		Usage:   chat.Usage{PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens, TotalTokens: resp.PromptTokens + resp.CompletionTokens},
	})
}
