package moe

import (
	"slices"
	"testing"
)

// Prompts are the corpus's user turns, cycled, each an assistant turn's
// opening away from a reply.
func TestCorpusPrompts(t *testing.T) {
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	end := tok.Encode(TokEnd + TokAssistant)
	ps := CorpusPrompts(tok, 200)
	if len(ps) != 200 {
		t.Fatalf("%d prompts", len(ps))
	}
	for i, p := range ps {
		if len(p) <= len(end) || !slices.Equal(p[len(p)-len(end):], end) {
			t.Fatalf("prompt %d does not open an assistant turn: %v", i, p)
		}
	}
	if slices.Equal(ps[0], ps[1]) || !slices.ContainsFunc(ps[1:], func(p []int) bool { return slices.Equal(p, ps[0]) }) {
		t.Fatal("prompts neither differ nor cycle")
	}
}
