package agent

import (
	"fmt"
	"slices"
	"strings"
)

// Tokenizer is what the harness needs of the policy's tokenizer.
type Tokenizer interface {
	// Encode tokenises text; special-token texts become their ids.
	Encode(text string) []int
	// Decode is the inverse of Encode for any ids.
	Decode(ids []int) (string, error)
	// SpecialID is the id of a special token such as "<|end|>".
	SpecialID(s string) (int, bool)
}

// Roles of chat messages.
const (
	System    = "system"
	User      = "user"
	Assistant = "assistant"
)

// Message is one chat turn as text.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Template renders messages as tokens:
//
//	<|system|> content <|end|> <|user|> content <|end|> <|assistant|> content <|end|> … <|assistant|>
//
// Content is tokenised as ordinary text: a special token's text inside an
// observation or an instruction never becomes a control token, so a
// command's output cannot forge a turn.
type Template struct {
	tok  Tokenizer
	role map[string]int
	end  int
}

// NewTemplate checks that tok has the chat special tokens.
func NewTemplate(tok Tokenizer) (*Template, error) {
	t := &Template{tok: tok, role: map[string]int{}}
	for _, r := range []string{System, User, Assistant} {
		id, ok := tok.SpecialID("<|" + r + "|>")
		if !ok {
			return nil, fmt.Errorf("rollout: the tokenizer has no <|%s|> token", r)
		}
		t.role[r] = id
	}
	end, ok := tok.SpecialID("<|end|>")
	if !ok {
		return nil, fmt.Errorf("rollout: the tokenizer has no <|end|> token")
	}
	t.end = end
	return t, nil
}

// End is the id that closes a turn; sampling stops on it.
func (t *Template) End() int { return t.end }

// Content tokenises text as ordinary text. "<|" is split so that no
// special token is recognised in it.
func (t *Template) Content(s string) []int {
	var out []int
	for {
		i := strings.Index(s, "<|")
		if i < 0 {
			return append(out, t.tok.Encode(s)...)
		}
		out = append(out, t.tok.Encode(s[:i+1])...)
		s = s[i+1:]
	}
}

// Message renders one message: role token, content, end token.
func (t *Template) Message(m Message) []int {
	return slices.Concat([]int{t.role[m.Role]}, t.Content(m.Content), []int{t.end})
}

// Header opens an assistant turn.
func (t *Template) Header() []int { return []int{t.role[Assistant]} }

// Render is the whole context for the next sample: every message, then an
// open assistant turn.
func (t *Template) Render(msgs []Message) []int {
	var out []int
	for _, m := range msgs {
		out = append(out, t.Message(m)...)
	}
	return append(out, t.Header()...)
}
