package moe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/t1pipe/t1/tokenizer"
)

// A checkpoint's tokenizer files are Hugging Face's: t1's own tokenizer
// is written as one (HFFiles), and a Hugging Face model's files (the chat
// template above all) travel with it unchanged, so a trained policy keeps
// its model's template and tokenizer. Checkpoints written before t1's
// tokenizer had that form hold t1's private tokenizer.json
// ({"type":"t1-byte-bpe-v1",…}), which still reads.

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
//
// Files exactly as t1 writes its own tokenizer (tokenizerFromHF) load as
// *Tokenizer, not as the Hugging Face tokenizer they equally describe: the
// ids are the same (TestHFLoaderAgrees), but t1's template (Chat) renders
// a turn without re-rendering the conversation, and the default run
// renders thousands of them.
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
	if tok, ok := tokenizerFromHF(files); ok {
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
	files, err := readTokenizerFiles(dir, name)
	if err != nil {
		return nil, err
	}
	tok, err := ReadTokenizer(files)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return tok, nil
}

// readTokenizerFiles reads dir's tokenizer file (name) as tokenizer.json
// and the Hugging Face files beside it that are there.
func readTokenizerFiles(dir, name string) (map[string][]byte, error) {
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
	return files, nil
}

// TokenizerMismatch compares the tokenizer files a policy's checkpoint
// holds with those of a model directory configured beside it, and names
// the first that differs ("" when they agree): tokenizer.json, then each
// file beside it. A file the checkpoint holds must be in the directory
// with the same bytes; the directory may add one the checkpoint lacks (a
// checkpoint that carries a bare tokenizer.json takes its template from
// the directory). Anything else would render one model's template over
// another's ids, which no repair of TITO can see.
func TokenizerMismatch(checkpoint, configured map[string][]byte) string {
	for _, name := range append([]string{TokenizerFile}, hfTokenizerFiles...) {
		ck, inCk := checkpoint[name]
		dir, inDir := configured[name]
		switch {
		case !inCk && name == TokenizerFile:
			return name + " (the checkpoint has none)"
		case !inCk:
		case !inDir:
			return name + " (the directory has none)"
		case !bytes.Equal(ck, dir):
			return name
		}
	}
	return ""
}

// TokenizerFilesOf returns the files tok is saved as: t1's own as
// Hugging Face files (HFFiles), or the Hugging Face files it was read from.
func TokenizerFilesOf(tok tokenizer.Tokenizer) (map[string][]byte, error) { return tokenizerFiles(tok) }

// TokenizerDirFiles reads a model directory's tokenizer.json and the
// Hugging Face files beside it that are there, as bytes.
func TokenizerDirFiles(dir string) (map[string][]byte, error) {
	return readTokenizerFiles(dir, TokenizerFile)
}

// CheckTokenizerDir refuses a model directory whose tokenizer files
// disagree with those of the checkpoint directory (TokenizerMismatch),
// naming both and the file.
func CheckTokenizerDir(checkpointDir, dir string) error {
	ck, err := TokenizerDirFiles(checkpointDir)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", checkpointDir, err)
	}
	own, err := TokenizerDirFiles(dir)
	if err != nil {
		return err
	}
	if f := TokenizerMismatch(ck, own); f != "" {
		return fmt.Errorf("the model directory %s and the checkpoint %s disagree on %s: one model's chat template over another's tokenizer would corrupt every prompt; point both at the same model, or leave stages.rollout.model.tokenizer empty to use the checkpoint's own files", dir, checkpointDir, f)
	}
	return nil
}

// LoadServed reads what t1 needs of a model it does not run itself, from
// a checkpoint directory an engine serves: the shape and model_type of
// its config.json (ParseShape) and its tokenizer, never its weights (a
// remote engine holds them; the directory need not). The tokenizer's ids
// must lie in the config's vocabulary.
func LoadServed(dir string) (Config, string, tokenizer.Tokenizer, error) {
	b, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return Config{}, "", nil, fmt.Errorf("checkpoint: %w", err)
	}
	c, modelType, err := ParseShape(b)
	if err != nil {
		return Config{}, "", nil, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
	}
	tok, err := LoadTokenizer(dir)
	if err != nil {
		return Config{}, "", nil, err
	}
	if tok.VocabSize() > c.Vocab {
		return Config{}, "", nil, fmt.Errorf("%s: %d ids exceed the vocab_size %d of its %s", filepath.Join(dir, TokenizerFile), tok.VocabSize(), c.Vocab, ConfigFile)
	}
	return c, modelType, tok, nil
}

// tokenizerFiles are the files that save tok.
func tokenizerFiles(tok tokenizer.Tokenizer) (map[string][]byte, error) {
	switch t := tok.(type) {
	case *Tokenizer:
		if files, err := t.HFFiles(); err == nil {
			return files, nil
		}
		// No Hugging Face form (two ids spell one text): t1's private
		// format still saves it exactly.
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

// TokenizerAt is LoadTokenizer of path, or t1's default tokenizer when
// path is empty.
func TokenizerAt(path string) (tokenizer.Tokenizer, error) {
	if path == "" {
		return DefaultTokenizer()
	}
	return LoadTokenizer(path)
}
