package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// benchCorpus is the mixed part of the reference corpus (prose, code,
// white space, CJK, emoji, combining marks, special tokens, invalid
// UTF-8), without the per-block samples and long runs: 2.2 KB, about one
// turn of a conversation, encoded in one call as a turn is.
func benchCorpus(b *testing.B) string {
	ref, _ := loadReference(b)
	var s strings.Builder
	for _, c := range ref.Cases {
		if strings.HasPrefix(c.Name, "block-") || strings.HasPrefix(c.Name, "marks-") || strings.HasPrefix(c.Name, "long-") {
			continue
		}
		s.WriteString(c.text(b))
		s.WriteString("\n")
	}
	return s.String()
}

// BenchmarkEncodeQwen3 reports encode speed on one core in tokens/s and,
// when node and the reference binding are installed, the same corpus
// through Hugging Face's Rust library on one thread, as the ratio
// go/rust (above 1: faster than the library).
func BenchmarkEncodeQwen3(b *testing.B) {
	h := loadQwen3(b)
	corpus := benchCorpus(b)
	tokens := len(h.Encode(corpus))
	b.SetBytes(int64(len(corpus)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		h.Encode(corpus)
	}
	sec := time.Since(start).Seconds()
	goRate := float64(tokens) * float64(b.N) / sec
	b.ReportMetric(goRate, "tokens/s")
	b.StopTimer()
	if rust, ok := rustRate(b, corpus, tokens); ok && b.N > 1 {
		b.ReportMetric(rust, "rust-tokens/s")
		b.ReportMetric(goRate/rust, "go/rust")
	}
}

func rustRate(b *testing.B, corpus string, tokens int) (float64, bool) {
	if _, err := exec.LookPath("node"); err != nil {
		return 0, false
	}
	cmd := exec.Command("node", "bench-reference.mjs")
	cmd.Dir = "testdata"
	cmd.Env = append(os.Environ(), "RAYON_NUM_THREADS=1", "TOKENIZERS_PARALLELISM=false")
	cmd.Stdin = strings.NewReader(corpus)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		b.Logf("rust reference not measured: %v", err)
		return 0, false
	}
	var r struct {
		Tokens  int     `json:"tokens"`
		Seconds float64 `json:"seconds"`
		Rounds  int     `json:"rounds"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		b.Fatalf("bench-reference.mjs: %v: %s", err, out.String())
	}
	if r.Tokens != tokens {
		b.Fatalf("the library made %d tokens of the corpus, Go %d", r.Tokens, tokens)
	}
	return float64(r.Tokens) * float64(r.Rounds) / r.Seconds, true
}

// BenchmarkEncodeQwen3Uncached is the same with the word cache emptied
// before each round: every word goes through the merges.
func BenchmarkEncodeQwen3Uncached(b *testing.B) {
	h := loadQwen3(b)
	corpus := benchCorpus(b)
	tokens := len(h.Encode(corpus))
	b.SetBytes(int64(len(corpus)))
	b.ResetTimer()
	var busy time.Duration
	for range b.N {
		for i := range h.cache.shards {
			h.cache.shards[i].m = nil
		}
		start := time.Now()
		h.Encode(corpus)
		busy += time.Since(start)
	}
	b.ReportMetric(float64(tokens)*float64(b.N)/busy.Seconds(), "tokens/s")
}

// BenchmarkParseQwen3 is the cost of loading the 11 MB tokenizer.json
// (parsed each time, as ParseHF does a file it has not just parsed).
func BenchmarkParseQwen3(b *testing.B) {
	raw, err := fixture()
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		if _, err := parseHF(raw); err != nil {
			b.Fatal(err)
		}
	}
}
