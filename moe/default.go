package moe

import (
	_ "embed"
	"sync"
)

// corpus is a small chat-formatted shell-session text the default
// tokenizer is trained on.
//
//go:embed corpus.txt
var corpus string

// Corpus returns the embedded training text (chat turns of a terminal agent).
func Corpus() string { return corpus }

var defaultTok = sync.OnceValues(func() (*Tokenizer, error) {
	return TrainTokenizer(corpus, DefaultConfig().Vocab, DefaultSpecials)
})

// DefaultTokenizer is the BPE tokenizer trained on the embedded corpus to
// DefaultConfig().Vocab ids with DefaultSpecials. Training is
// deterministic, so every call and every process gets the same merges.
func DefaultTokenizer() (*Tokenizer, error) { return defaultTok() }
