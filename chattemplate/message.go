package chattemplate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Roles a message may have. A template ignores a role it does not know
// (Qwen3's drops it silently), so any other is refused before rendering.
var Roles = []string{"system", "user", "assistant", "tool"}

// Message is one turn, in the shape transformers' apply_chat_template takes.
// The template sees it as the JSON object it marshals to, fields in the order
// below, absent ones left out (so `message.reasoning_content is defined` is
// false unless it is set).
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is the assistant's thinking, which Qwen3's template
	// renders inside <think> for turns after the last user query only.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
}

// ToolCall is one call an assistant turn makes.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function" or empty
	Function FunctionCall `json:"function"`
}

// FunctionCall names a function and its arguments. Arguments is a JSON
// object, whose key order the template keeps (json.dumps does not sort), or a
// JSON string, which templates such as Qwen3's print verbatim: the way to
// re-render a sampled call byte for byte.
type FunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ParseMessages reads a JSON array of messages. Every message needs a role
// and a content; a field the Message type does not hold is refused rather
// than dropped.
func ParseMessages(data []byte) ([]Message, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("messages: want a JSON array of message objects: %w", err)
	}
	msgs := make([]Message, len(raws))
	for i, raw := range raws {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, fmt.Errorf("message %d: want an object: %w", i, err)
		}
		if fields["role"] == nil || fields["content"] == nil {
			return nil, fmt.Errorf("message %d: role and content are required (content may be \"\")", i)
		}
		for k, v := range fields {
			// A template can tell null from absent (is defined), and the
			// Message type keeps only absent.
			if string(v) == "null" {
				return nil, fmt.Errorf("message %d: %s is null: leave it out, or give it a value (content may be \"\")", i, k)
			}
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&msgs[i]); err != nil {
			return nil, fmt.Errorf("message %d: %w (fields: role, content, reasoning_content, tool_calls, tool_call_id, name; role and content are strings)", i, err)
		}
	}
	if err := validate(msgs); err != nil {
		return nil, err
	}
	return msgs, nil
}

func validate(msgs []Message) error {
	for i, m := range msgs {
		known := false
		for _, r := range Roles {
			known = known || m.Role == r
		}
		if !known {
			return fmt.Errorf("message %d: role %q is not one of %s", i, m.Role, strings.Join(Roles, ", "))
		}
		if m.Role != "assistant" && (m.ReasoningContent != nil || len(m.ToolCalls) > 0) {
			return fmt.Errorf("message %d: reasoning_content and tool_calls belong to assistant messages, not %s", i, m.Role)
		}
		for j, c := range m.ToolCalls {
			if c.Type != "" && c.Type != "function" {
				return fmt.Errorf("message %d, tool call %d: type %q, want \"function\"", i, j, c.Type)
			}
			if c.Function.Name == "" {
				return fmt.Errorf("message %d, tool call %d: the function has no name", i, j)
			}
			a := bytes.TrimSpace(c.Function.Arguments)
			if len(a) == 0 || (a[0] != '{' && a[0] != '"') || !json.Valid(a) {
				return fmt.Errorf("message %d, tool call %d (%s): arguments must be a JSON object or a JSON string", i, j, c.Function.Name)
			}
		}
	}
	return nil
}
