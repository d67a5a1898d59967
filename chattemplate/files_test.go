package chattemplate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFilesRender(t *testing.T) {
	dir := t.TempDir()
	msgs := filepath.Join(dir, "messages.json")
	tools := filepath.Join(dir, "tools.json")
	if err := os.WriteFile(msgs, []byte(`[{"role": "user", "content": "hi"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tools, []byte(`[{"type": "function", "function": {"name": "bash"}}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	off := false
	f := Files{Config: "testdata/qwen3", Messages: msgs, Tools: tools, AddGenerationPrompt: true, EnableThinking: &off}
	text, err := f.Render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"name": "bash"`, "<|im_start|>user\nhi<|im_end|>\n", "<think>\n\n</think>"} {
		if !strings.Contains(text, want) {
			t.Fatalf("lacks %q:\n%s", want, text)
		}
	}
	f.Kwargs = []string{"x=notjson"}
	if _, err := f.Render(); err == nil || !strings.Contains(err.Error(), "want name=JSON") {
		t.Fatalf("bad kwarg: %v", err)
	}
	if _, err := (Files{Config: "testdata/qwen3"}).Render(); err == nil {
		t.Fatal("no messages accepted")
	}
}

func TestRenderedWriteText(t *testing.T) {
	var b strings.Builder
	if err := (&Rendered{Template: "x", Text: "a\n"}).WriteText(&b); err != nil || b.String() != "a\n" {
		t.Fatalf("%q %v", b.String(), err)
	}
}
