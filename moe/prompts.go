package moe

import (
	"strings"

	"github.com/t1pipe/t1/tokenizer"
)

// CorpusPrompts turns the user turns of the embedded corpus into chat
// prompts ending in <|assistant|>, cycling to reach n. A Hugging Face
// tokenizer reads t1's turn markers as ordinary text, which serves the
// gap measurement as well: it needs ids, not a conversation.
func CorpusPrompts(tok tokenizer.Tokenizer, n int) [][]int {
	var turns []string
	for _, part := range strings.Split(Corpus(), TokUser)[1:] {
		if text, _, ok := strings.Cut(part, TokEnd); ok {
			turns = append(turns, text)
		}
	}
	out := make([][]int, n)
	for i := range out {
		out[i] = tok.Encode(TokUser + turns[i%len(turns)] + TokEnd + TokAssistant)
	}
	return out
}
