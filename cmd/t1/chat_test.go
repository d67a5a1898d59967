package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// t1 chat render prints what the reference renders for a corpus case, byte
// for byte, with tools, a generation prompt and enable_thinking.
func TestChatRender(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../chattemplate/testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus struct {
		Cases []struct {
			Name     string          `json:"name"`
			Messages json.RawMessage `json:"messages"`
			Tools    json.RawMessage `json:"tools"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := "../../chattemplate/testdata/qwen3/tokenizer_config.json"
	for _, tc := range []struct{ name, ref string }{
		{"one_tool_call", "one_tool_call+gen.txt"},
		{"enable_thinking_false", "enable_thinking_false+gen.txt"},
	} {
		args := []string{"chat", "render", "--tokenizer-config", cfg, "--add-generation-prompt"}
		for _, c := range corpus.Cases {
			if c.Name != tc.name {
				continue
			}
			msgs := filepath.Join(dir, tc.name+".messages.json")
			if err := os.WriteFile(msgs, c.Messages, 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, "--messages", msgs)
			if c.Tools != nil {
				tools := filepath.Join(dir, tc.name+".tools.json")
				if err := os.WriteFile(tools, c.Tools, 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--tools", tools)
			}
		}
		if tc.name == "enable_thinking_false" {
			args = append(args, "--enable-thinking=false")
		}
		got, err := t1(t, args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want, err := os.ReadFile(filepath.Join("../../chattemplate/testdata/reference", tc.ref))
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Fatalf("%s: got %q, want %q", tc.name, got, want)
		}
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[{"role": "narrator", "content": "x"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := t1(t, "chat", "render", "--tokenizer-config", cfg, "--messages", bad); err == nil || !strings.Contains(err.Error(), `role "narrator"`) {
		t.Fatalf("err = %v", err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`[{"role": "user", "content": "x"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := t1(t, "chat", "render", "--tokenizer-config", cfg, "--messages", good, "--kwarg", "x=notjson"); err == nil || !strings.Contains(err.Error(), "want name=JSON") {
		t.Fatalf("a kwarg that is not JSON: err = %v", err)
	}
}
