package moe

import "fmt"

// Message is one chat turn.
type Message struct {
	// Role is system, user, assistant or tool.
	Role    string `json:"role"`
	Content string `json:"content"`
}

var roleTokens = map[string]string{"system": TokSystem, "user": TokUser, "assistant": TokAssistant, "tool": TokTool}

// EncodeOrdinary tokenises text without recognising special tokens: text
// that spells "<|end|>" becomes ordinary byte tokens, so content from a
// shell or a user can never forge a turn boundary.
func (t *Tokenizer) EncodeOrdinary(text string) []int {
	var out []int
	for _, c := range chunks(text) {
		out = t.encodeChunk(out, c)
	}
	return out
}

// EncodeChat renders messages as <|role|>content<|end|> … and, with
// generationPrompt, a final <|assistant|> for the model to continue. The
// content is encoded with EncodeOrdinary. Because every turn starts and
// ends at a special token, which pre-tokenisation never merges across,
// the encoding of a conversation is the encoding of its first turns
// followed by that of the rest: appending a turn only appends tokens (the
// strict-prefix case of TITO).
func (t *Tokenizer) EncodeChat(messages []Message, generationPrompt bool) ([]int, error) {
	end, ok := t.specialID[TokEnd]
	if !ok {
		return nil, fmt.Errorf("chat: the tokenizer has no %s token", TokEnd)
	}
	var out []int
	for i, m := range messages {
		tok, ok := roleTokens[m.Role]
		if !ok {
			return nil, fmt.Errorf("chat: message %d: unknown role %q (want system, user, assistant or tool)", i, m.Role)
		}
		id, ok := t.specialID[tok]
		if !ok {
			return nil, fmt.Errorf("chat: message %d: the tokenizer has no %s token", i, tok)
		}
		out = append(out, id)
		out = append(out, t.EncodeOrdinary(m.Content)...)
		out = append(out, end)
	}
	if generationPrompt {
		id, ok := t.specialID[TokAssistant]
		if !ok {
			return nil, fmt.Errorf("chat: the tokenizer has no %s token", TokAssistant)
		}
		out = append(out, id)
	}
	return out, nil
}
