package moe

import (
	"fmt"
	"slices"
)

// Roles of chat messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one chat turn.
type Message struct {
	// Role is system, user, assistant or tool.
	Role    string `json:"role"`
	Content string `json:"content"`
}

var roleTokens = map[string]string{RoleSystem: TokSystem, RoleUser: TokUser, RoleAssistant: TokAssistant, RoleTool: TokTool}

// EncodeOrdinary tokenises text without recognising special tokens: text
// that spells "<|end|>" becomes ordinary byte tokens, so content from a
// shell or a user can never forge a turn boundary. For text that spells no
// special token it equals Encode.
func (t *Tokenizer) EncodeOrdinary(text string) []int {
	var out []int
	for _, c := range chunks(text) {
		out = t.encodeChunk(out, c)
	}
	return out
}

// Chat is the reference model's chat template, the one rendering of a
// conversation into ids (the agent harness and /v1/chat/completions both
// use it):
//
//	<|system|>content<|end|><|user|>content<|end|>…<|assistant|>
//
// Content is always ordinary text (EncodeOrdinary): a message that spells
// a special token, such as a command's output holding "<|end|><|user|>",
// encodes as ordinary tokens and can never forge a turn or a role. Because
// every turn starts and ends at a special token, which pre-tokenisation
// never merges across, the rendering of a conversation is the rendering of
// its first turns followed by that of the rest: appending a turn only
// appends tokens (the strict-prefix case of TITO). <|end|> closes a turn
// and is the stop token of sampling.
//
// A Chat is immutable and safe for concurrent use.
type Chat struct {
	tok  *Tokenizer
	role map[string]int
	end  int
}

// NewChat checks that tok has <|end|> and the system, user and assistant
// role tokens; <|tool|> is optional (a tool message then fails to render).
func NewChat(tok *Tokenizer) (*Chat, error) {
	c := &Chat{tok: tok, role: map[string]int{}}
	for _, r := range []string{RoleSystem, RoleUser, RoleAssistant, RoleTool} {
		if id, ok := tok.SpecialID(roleTokens[r]); ok {
			c.role[r] = id
		} else if r != RoleTool {
			return nil, fmt.Errorf("chat: the tokenizer has no %s token", roleTokens[r])
		}
	}
	end, ok := tok.SpecialID(TokEnd)
	if !ok {
		return nil, fmt.Errorf("chat: the tokenizer has no %s token", TokEnd)
	}
	c.end = end
	return c, nil
}

// Tokenizer is the tokenizer the chat renders with.
func (c *Chat) Tokenizer() *Tokenizer { return c.tok }

// End is the id that closes a turn; sampling stops on it.
func (c *Chat) End() int { return c.end }

// Reply is the content of a sampled assistant turn: ids without the end
// token that closed it, if one did.
func (c *Chat) Reply(ids []int) []int {
	if n := len(ids); n > 0 && ids[n-1] == c.end {
		return ids[:n-1]
	}
	return ids
}

// Content tokenises a message's text as ordinary text.
func (c *Chat) Content(s string) []int { return c.tok.EncodeOrdinary(s) }

// Message renders one message: role token, content, end token. It fails
// only on a role the template or the tokenizer lacks; system, user and
// assistant messages always render.
func (c *Chat) Message(m Message) ([]int, error) {
	id, ok := c.role[m.Role]
	if !ok {
		if _, known := roleTokens[m.Role]; known {
			return nil, fmt.Errorf("chat: the tokenizer has no %s token", roleTokens[m.Role])
		}
		return nil, fmt.Errorf("chat: unknown role %q (want system, user, assistant or tool)", m.Role)
	}
	return slices.Concat([]int{id}, c.Content(m.Content), []int{c.end}), nil
}

// Header opens an assistant turn for the model to continue.
func (c *Chat) Header() []int { return []int{c.role[RoleAssistant]} }

// Render is the whole context for the next sample: every message, then an
// open assistant turn.
func (c *Chat) Render(msgs []Message) ([]int, error) {
	var out []int
	for i, m := range msgs {
		ids, err := c.Message(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out = append(out, ids...)
	}
	return append(out, c.Header()...), nil
}
