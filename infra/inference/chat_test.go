package inference

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/chat"
)

// The chat client gets completions from the reference engine over
// loopback; a seed repeats one.
func TestChatCompletions(t *testing.T) {
	ref, _ := testReference(t)
	c := &chat.Client{URL: serve(t, ref), Timeout: time.Minute, Attempts: 1}
	ctx := context.Background()
	req := chat.Request{Model: "ref", Temperature: 1, MaxTokens: 24, Seed: 5, Messages: []chat.Message{
		{Role: "system", Content: "You write shell."}, {Role: "user", Content: strings.Repeat("Sort /app/data.csv. ", 200)}}}
	first, err := c.Complete(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	ch := first.Choices[0]
	if first.Object != "chat.completion" || first.Model != "ref" || ch.Message.Role != "assistant" || ch.FinishReason == "" ||
		first.Usage.CompletionTokens < 1 || first.Usage.CompletionTokens > 24 || first.Usage.PromptTokens > 256-24 {
		t.Fatalf("completion %+v", first)
	}
	again, err := c.Complete(ctx, req)
	if err != nil || again.Choices[0].Message.Content != ch.Message.Content {
		t.Fatalf("the same seed gave %q, then %q (%v)", ch.Message.Content, again.Choices[0].Message.Content, err)
	}
	req.Stream = true
	_, err = c.Complete(ctx, req)
	var se *chat.StatusError
	if !errors.As(err, &se) || se.Code != 400 || !strings.Contains(se.Message, "stream") {
		t.Fatalf("a streaming request: %v", err)
	}
}
