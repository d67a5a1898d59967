package chattemplate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/t1pipe/t1/moe"
)

// agentConversation is an episode of turns turns in the shape native tool
// calls give it: a system prompt, the task, then per turn an assistant
// reasoning and calling bash, and the command's output as a tool message.
func agentConversation(turns int) ([]Message, []any) {
	bash := json.RawMessage(`{"type": "function", "function": {"name": "bash", "description": "Run a shell command in the task's sandbox.", "parameters": {"type": "object", "required": ["command"], "properties": {"command": {"type": "string"}, "timeout_sec": {"type": "integer", "minimum": 1}}}}}`)
	msgs := []Message{
		{Role: "system", Content: "You are an agent working in a Linux sandbox. Solve the task, then stop."},
		{Role: "user", Content: "Create /app/report.csv with one line per log file in /var/log/app: its name and its line count."},
	}
	for i := 0; i < turns; i++ {
		r := fmt.Sprintf("Step %d: I list what is there and check the previous output before going on.", i)
		msgs = append(msgs,
			Message{Role: "assistant", ReasoningContent: &r, ToolCalls: []ToolCall{{Type: "function", Function: FunctionCall{
				Name: "bash", Arguments: json.RawMessage(fmt.Sprintf(`{"command": "ls -la /var/log/app | head -n %d && wc -l /var/log/app/*.log", "timeout_sec": 30}`, i+5))}}}},
			Message{Role: "tool", Content: strings.Repeat(fmt.Sprintf("-rw-r--r-- 1 root root %6d Mar  5 09:07 service-%02d.log\n", 1000+i, i), 8)},
		)
	}
	return msgs, []any{bash}
}

// Render of a 20-turn tool-calling episode with Qwen3's template, beside the
// baseline of encoding the rendered text with t1's reference byte-level BPE:
// the TITO assembler would pay both at every turn boundary.
func BenchmarkRender(b *testing.B) {
	tmpl, err := Load("testdata/qwen3")
	if err != nil {
		b.Fatal(err)
	}
	msgs, tools := agentConversation(20)
	o := Options{Tools: tools, AddGenerationPrompt: true}
	text, err := tmpl.Render(msgs, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("qwen3", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			if _, err := tmpl.Render(msgs, o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline-encode", func(b *testing.B) {
		tok, err := moe.DefaultTokenizer()
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			tok.Encode(text)
		}
	})
}
