package chat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const key = "sk-test-0123456789abcdef"

// scripted is a chat-completions endpoint that answers from a list of
// handlers, one per request, repeating the last: a scripted server, so
// the client's retries and errors are tested over real HTTP.
func scripted(t *testing.T, script ...func(w http.ResponseWriter, req Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Path || r.Method != http.MethodPost {
			http.Error(w, "not here", http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"message":"Incorrect API key provided: ` + r.Header.Get("Authorization") + `","type":"invalid_request_error"}}`))
			return
		}
		var req Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		i := int(n.Add(1)) - 1
		script[min(i, len(script)-1)](w, req)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func answer(text string) func(http.ResponseWriter, Request) {
	return func(w http.ResponseWriter, req Request) {
		json.NewEncoder(w).Encode(Response{ID: "c1", Object: "chat.completion", Model: req.Model,
			Choices: []Choice{{Message: Message{Role: "assistant", Content: text}, FinishReason: "stop"}}})
	}
}

func status(code int) func(http.ResponseWriter, Request) {
	return func(w http.ResponseWriter, _ Request) { http.Error(w, "overloaded", code) }
}

func client(srv *httptest.Server, apiKey string) *Client {
	return &Client{URL: srv.URL + "/v1/", APIKey: apiKey, Backoff: time.Millisecond, Attempts: 3, Timeout: 5 * time.Second}
}

func TestCompleteSendsTheRequest(t *testing.T) {
	var got Request
	srv, _ := scripted(t, func(w http.ResponseWriter, req Request) { got = req; answer("hi")(w, req) })
	resp, err := client(srv, key).Complete(context.Background(), Request{Model: "m", Temperature: 0.3, MaxTokens: 9, Seed: 42,
		Messages: []Message{{Role: "user", Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "hi" || got.Model != "m" || got.Temperature != 0.3 || got.MaxTokens != 9 || got.Seed != 42 || got.Stream {
		t.Fatalf("response %+v, request %+v", resp, got)
	}
}

func TestTransientFailuresAreRetried(t *testing.T) {
	for name, first := range map[string]func(http.ResponseWriter, Request){
		"500": status(http.StatusInternalServerError),
		"429": status(http.StatusTooManyRequests),
		"slow": func(w http.ResponseWriter, req Request) {
			time.Sleep(300 * time.Millisecond)
			answer("late")(w, req)
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv, n := scripted(t, first, answer("ok"))
			c := client(srv, key)
			c.Timeout = 100 * time.Millisecond
			resp, err := c.Complete(context.Background(), Request{Model: "m"})
			if err != nil || resp.Choices[0].Message.Content != "ok" || n.Load() != 2 {
				t.Fatalf("%d requests, %+v, %v", n.Load(), resp, err)
			}
		})
	}
}

func TestExhaustedRetriesAreTransient(t *testing.T) {
	srv, n := scripted(t, status(http.StatusBadGateway))
	_, err := client(srv, key).Complete(context.Background(), Request{Model: "m"})
	var se *StatusError
	if !errors.As(err, &se) || se.Permanent() || n.Load() != 3 || !strings.Contains(err.Error(), "3 attempts") {
		t.Fatalf("%d requests: %v", n.Load(), err)
	}
}

func TestClientErrorsArePermanentAndNeverCarryTheKey(t *testing.T) {
	srv, n := scripted(t, answer("unreachable"))
	wrong := "sk-wrong-key-that-the-server-echoes"
	_, err := client(srv, wrong).Complete(context.Background(), Request{Model: "m"})
	var se *StatusError
	if !errors.As(err, &se) || !se.Permanent() || se.Code != 401 || n.Load() != 0 {
		t.Fatalf("%d requests: %v", n.Load(), err)
	}
	if strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), "Incorrect API key") {
		t.Fatalf("error %q", err)
	}
}

func TestUnusableAnswers(t *testing.T) {
	for name, c := range map[string]struct {
		h    func(http.ResponseWriter, Request)
		want func(error) bool
	}{
		"not JSON": {func(w http.ResponseWriter, _ Request) { w.Write([]byte("<html>proxy</html>")) },
			func(err error) bool { var b *BadReply; return errors.As(err, &b) }},
		"no choices": {func(w http.ResponseWriter, _ Request) { w.Write([]byte(`{"choices":[]}`)) },
			func(err error) bool { var b *BadReply; return errors.As(err, &b) }},
		"not UTF-8": {func(w http.ResponseWriter, _ Request) {
			w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"caf` + "\xe9" + `"}}]}`))
		}, func(err error) bool {
			var b *BadReply
			return errors.As(err, &b) && strings.Contains(err.Error(), "UTF-8")
		}},
		"huge": {answer(strings.Repeat("x", 2<<10)),
			func(err error) bool { return errors.Is(err, ErrTooLarge) }},
	} {
		t.Run(name, func(t *testing.T) {
			srv, n := scripted(t, c.h)
			cl := client(srv, key)
			cl.MaxBytes = 1 << 10
			_, err := cl.Complete(context.Background(), Request{Model: "m"})
			if !c.want(err) || n.Load() != 1 {
				t.Fatalf("%d requests: %v", n.Load(), err)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	for _, u := range []string{"http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/"} {
		if got := (&Client{URL: u}).Endpoint(); got != "http://h:8000/v1/chat/completions" {
			t.Errorf("%s: %s", u, got)
		}
	}
}
