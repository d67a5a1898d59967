// Package chat is a client of OpenAI-compatible chat-completion endpoints
// (POST /v1/chat/completions, non-streaming), the API that vLLM, SGLang,
// llama.cpp, TGI and hosted services all speak, plus the wire types a
// server of that API shares with it.
//
// Errors sort into three kinds a caller acts on differently:
//
//	*StatusError, Permanent()  a 4xx other than 408 and 429: the request or
//	                           the credentials are wrong; retrying will not help
//	ErrTooLarge, *BadReply     the server answered, but not with a usable
//	                           completion: a property of this reply
//	anything else              transport failures, timeouts, 5xx, 408, 429,
//	                           after the client's own retries: try again later
//
// The API key travels only in the Authorization header; it is never part
// of an error, and a server message that echoes it is redacted.
package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Path is the endpoint, relative to the server's root.
const Path = "/v1/chat/completions"

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"` // system | user | assistant
	Content string `json:"content"`
}

// Request is a chat-completion request. Seed asks the server for
// reproducible sampling (OpenAI's seed); it is kept below 2^63 because
// servers parse it as a signed integer.
type Request struct {
	Model       string    `json:"model"`
	Messages    []Message `json:"messages"`
	Temperature float64   `json:"temperature"`
	MaxTokens   int       `json:"max_tokens,omitempty"`
	Seed        int64     `json:"seed"`
	Stream      bool      `json:"stream"`
}

// Response is a chat completion.
type Response struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   Usage    `json:"usage"`
}

// Choice is one completion of a response.
type Choice struct {
	Index        int     `json:"index"`
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"`
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ErrorBody is the error shape of OpenAI-compatible servers.
type ErrorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type,omitempty"`
		Code    any    `json:"code,omitempty"`
	} `json:"error"`
}

// StatusError is a non-2xx answer.
type StatusError struct {
	Code int
	// Message is the server's error message (or the start of its body),
	// with the API key redacted.
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("chat completions: HTTP %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// Permanent reports whether retrying the same request cannot succeed: a
// client error other than a timeout (408) or a rate limit (429).
func (e *StatusError) Permanent() bool {
	return e.Code >= 400 && e.Code < 500 && e.Code != http.StatusRequestTimeout && e.Code != http.StatusTooManyRequests
}

// ErrTooLarge is a response body over Client.MaxBytes.
var ErrTooLarge = errors.New("chat completions: response too large")

// BadReply is a 2xx answer that is not a usable completion.
type BadReply struct{ Reason string }

func (e *BadReply) Error() string { return "chat completions: " + e.Reason }

// Client calls one endpoint. The zero value is not usable: URL is required.
type Client struct {
	// URL is the server's base URL, with or without a trailing /v1.
	URL string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// Timeout bounds each attempt (default 2m).
	Timeout time.Duration
	// Attempts is how many times a transient failure is tried in all
	// (default 4); Backoff is the first pause between attempts, doubling
	// after each (default 1s).
	Attempts int
	Backoff  time.Duration
	// MaxBytes bounds the response body (default 4 MiB).
	MaxBytes int64
	// HTTP is the client to use (default http.DefaultClient).
	HTTP *http.Client
}

// Endpoint is the URL requests go to.
func (c *Client) Endpoint() string {
	u := strings.TrimRight(c.URL, "/")
	return strings.TrimSuffix(u, "/v1") + Path
}

// Complete sends req and returns the completion, retrying transient
// failures with exponential back-off; see the package doc for the errors.
func (c *Client) Complete(ctx context.Context, req Request) (*Response, error) {
	attempts, pause := c.Attempts, c.Backoff
	if attempts <= 0 {
		attempts = 4
	}
	if pause <= 0 {
		pause = time.Second
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("chat completions: %w", err)
	}
	var last error
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("chat completions: %w (after %v)", ctx.Err(), last)
			case <-time.After(pause):
			}
			pause *= 2
		}
		resp, err := c.once(ctx, body)
		if err == nil {
			return resp, nil
		}
		var se *StatusError
		var bad *BadReply
		if errors.As(err, &se) && se.Permanent() || errors.As(err, &bad) || errors.Is(err, ErrTooLarge) || ctx.Err() != nil {
			return nil, err
		}
		last = err
	}
	return nil, fmt.Errorf("chat completions: %d attempts failed, the last: %w", attempts, last)
}

func (c *Client) once(ctx context.Context, body []byte) (*Response, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Endpoint(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("chat completions: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	if c.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("chat completions: %s", c.redact(err.Error()))
	}
	defer res.Body.Close()
	max := c.MaxBytes
	if max <= 0 {
		max = 4 << 20
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("chat completions: reading the response: %s", c.redact(err.Error()))
	}
	if res.StatusCode/100 != 2 {
		return nil, &StatusError{Code: res.StatusCode, Message: c.redact(errorMessage(data))}
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
	}
	// encoding/json would quietly turn invalid bytes into U+FFFD.
	if !utf8.Valid(data) {
		return nil, &BadReply{Reason: "the response is not valid UTF-8"}
	}
	var out Response
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, &BadReply{Reason: fmt.Sprintf("the response is not a chat completion: %v", err)}
	}
	if len(out.Choices) == 0 {
		return nil, &BadReply{Reason: "the response has no choices"}
	}
	return &out, nil
}

// errorMessage is the message of an error body, else its first 300 bytes.
func errorMessage(data []byte) string {
	var eb ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error.Message != "" {
		return eb.Error.Message
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}

func (c *Client) redact(s string) string {
	if c.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.APIKey, "[redacted]")
}
