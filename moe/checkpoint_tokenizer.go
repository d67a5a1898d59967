package moe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/t1pipe/t1/tokenizer"
)

// A checkpoint's tokenizer.json is t1's own ({"type":"t1-byte-bpe-v1",…})
// or a Hugging Face model's, whose other tokenizer files (the chat
// template above all) travel with it: a checkpoint written from a loaded
// one carries them unchanged, so a trained policy keeps its model's
// template and tokenizer.

// TokenizerConfigFile is a Hugging Face model's tokenizer_config.json: its
// chat_template and special tokens.
const TokenizerConfigFile = "tokenizer_config.json"

// hfTokenizerFiles are the files beside tokenizer.json that a checkpoint
// carries for a Hugging Face tokenizer when they are there.
var hfTokenizerFiles = []string{TokenizerConfigFile, "special_tokens_map.json", "chat_template.jinja"}

// TokenizerCompanions are the files a Hugging Face model keeps beside
// tokenizer.json that ReadTokenizer reads.
func TokenizerCompanions() []string { return slices.Clone(hfTokenizerFiles) }

// HFTokenizer is a Hugging Face model's tokenizer as a checkpoint holds
// it: tokenizer.json parsed, and its files kept byte for byte.
type HFTokenizer struct {
	*tokenizer.HF
	files map[string][]byte
}

// File is one of the tokenizer's files as read (tokenizer.json,
// tokenizer_config.json, …); ok is false when the model had none.
func (h *HFTokenizer) File(name string) (b []byte, ok bool) {
	b, ok = h.files[name]
	return b, ok
}

// ReadTokenizer reads a checkpoint's tokenizer: files holds tokenizer.json
// and any of the files a Hugging Face model keeps beside it. Every path
// that tokenises for a model (rollouts, serving, training) takes its
// tokenizer from the model's own files through this one function. t1's
// format is told apart by its type field; anything else must be a Hugging
// Face tokenizer.json that package tokenizer implements exactly, else it
// is refused with the feature named.
func ReadTokenizer(files map[string][]byte) (tokenizer.Tokenizer, error) {
	b, ok := files[TokenizerFile]
	if !ok {
		return nil, fmt.Errorf("no %s", TokenizerFile)
	}
	if ownFormat(b) {
		tok := &Tokenizer{}
		if err := json.Unmarshal(b, tok); err != nil {
			return nil, err
		}
		return tok, nil
	}
	h, err := tokenizer.ParseHF(b)
	if err != nil {
		return nil, fmt.Errorf("neither t1's tokenizer (no type %q) nor a Hugging Face one t1 implements: %w", tokenizerType, err)
	}
	kept := map[string][]byte{TokenizerFile: b}
	for _, name := range hfTokenizerFiles {
		if f, ok := files[name]; ok {
			kept[name] = f
		}
	}
	return &HFTokenizer{HF: h, files: kept}, nil
}

// ownFormat reports whether a tokenizer.json is t1's own: a top-level
// type field, which Hugging Face's files do not have.
func ownFormat(b []byte) bool {
	var head struct {
		Type *string `json:"type"`
	}
	return json.Unmarshal(b, &head) == nil && head.Type != nil
}

// LoadTokenizer reads the tokenizer of a checkpoint or model directory
// (tokenizer.json and, for a Hugging Face model, the files beside it), or
// of a tokenizer.json file named directly.
func LoadTokenizer(path string) (tokenizer.Tokenizer, error) {
	dir, name := path, TokenizerFile
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir, name = filepath.Dir(path), filepath.Base(path)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w (want a model directory holding %s, or the file)", err, TokenizerFile)
	}
	files := map[string][]byte{TokenizerFile: b}
	for _, f := range hfTokenizerFiles {
		switch b, err := os.ReadFile(filepath.Join(dir, f)); {
		case err == nil:
			files[f] = b
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	tok, err := ReadTokenizer(files)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return tok, nil
}

// tokenizerFiles are the files that save tok.
func tokenizerFiles(tok tokenizer.Tokenizer) (map[string][]byte, error) {
	switch t := tok.(type) {
	case *Tokenizer:
		b, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		return map[string][]byte{TokenizerFile: b}, nil
	case *HFTokenizer:
		out := make(map[string][]byte, len(t.files))
		for k, v := range t.files {
			out[k] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("checkpoint: a %T cannot be saved: a checkpoint holds t1's tokenizer or a Hugging Face model's files (LoadTokenizer)", tok)
}
