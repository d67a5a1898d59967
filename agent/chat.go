package agent

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/t1pipe/t1/chattemplate"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/tokenizer"
)

// Message is one turn of a conversation, in the shape a Hugging Face chat
// template takes (role, content, assistant reasoning and tool calls).
type Message = chattemplate.Message

// Chat is a model's chat rendering: how a conversation becomes the ids a
// policy is prompted with. OwnChat is t1's own template, Template a model's
// Jinja chat_template; Settings.Chat chooses one per model.
type Chat interface {
	// Tokenizer is the tokenizer the rendering tokenises with.
	Tokenizer() tokenizer.Tokenizer
	// Render is msgs followed by an open assistant turn (the generation
	// prompt). Text in a system, user or tool message is always ordinary:
	// a command's output that spells a control token stays text.
	Render(msgs []Message) ([]int, error)
	// Stops are the ids that end an assistant turn; sampling stops on them.
	Stops() []int
	// ObservationRole is the role a command's output goes back as.
	ObservationRole() string
	// Tools are the tool schemas the template shows the policy (nil: none).
	Tools() []any
	// reply is the ids a policy samples to write text and end its turn.
	reply(text string) []int
}

// OwnChat is t1's own template (moe.Chat): every message renders on its
// own, so a conversation's rendering is the concatenation of its messages'
// and the assembler repairs drift message by message. Observations go back
// as user turns; reasoning and tool calls are refused.
func OwnChat(c *moe.Chat) Chat { return ownChat{c} }

type ownChat struct{ c *moe.Chat }

func (o ownChat) Tokenizer() tokenizer.Tokenizer { return o.c.Tokenizer() }
func (o ownChat) Stops() []int                   { return []int{o.c.End()} }
func (o ownChat) ObservationRole() string        { return moe.RoleUser }
func (o ownChat) Tools() []any                   { return nil }

func (o ownChat) reply(text string) []int { return append(o.c.Content(text), o.c.End()) }

func (o ownChat) Render(msgs []Message) ([]int, error) {
	var out []int
	for i, m := range msgs {
		ids, err := o.message(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out = append(out, ids...)
	}
	return append(out, o.c.Header()...), nil
}

func (o ownChat) message(m Message) ([]int, error) {
	if m.ReasoningContent != nil || len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.Name != "" {
		return nil, fmt.Errorf("chat: t1's template renders role and content only; configure the model's own chat template (chat: template) for reasoning and tool calls")
	}
	return o.c.Message(moe.Message{Role: m.Role, Content: m.Content})
}

// Template renders with a model's own Jinja chat_template and tokenises the
// rendering with its tokenizer, as transformers' apply_chat_template(
// tokenize=True) does, with one difference: control tokens are recognised
// only where the template wrote them. Text inside a system, user or tool
// message that spells an added token ("<|im_end|>", "<tool_call>") is
// escaped before rendering and tokenised as ordinary text, so no command
// output becomes a control token. An assistant message is the policy's own
// sampled text and is tokenised as the model would read it.
//
// A template need not render message by message (Qwen3's drops reasoning
// before the last user query and merges consecutive tool messages), so the
// assembler re-renders the whole conversation at each boundary.
type Template struct {
	tok   tokenizer.Tokenizer
	tmpl  *chattemplate.Template
	opts  chattemplate.Options
	stops []int
	added []string // longest first
	first [256]bool
}

// TemplateOptions are the template arguments a harness fixes per model.
type TemplateOptions struct {
	// Tools are JSON schemas the template shows (native tool calls).
	Tools []any
	// EnableThinking, when set, is the template's enable_thinking.
	EnableThinking *bool
}

// NewTemplate pairs a chat template with its tokenizer. The stop token is
// the config's eos_token, which must be one of the tokenizer's added
// tokens.
func NewTemplate(tok tokenizer.Tokenizer, tmpl *chattemplate.Template, o TemplateOptions) (*Template, error) {
	eos, ok := tmpl.Token("eos_token")
	if !ok {
		return nil, fmt.Errorf("chat template: tokenizer_config.json names no eos_token, so a turn's end is unknown: set eos_token")
	}
	id, ok := tok.SpecialID(eos)
	if !ok {
		return nil, fmt.Errorf("chat template: eos_token %q is not an added token of the tokenizer: the tokenizer and template do not belong together", eos)
	}
	t := &Template{tok: tok, tmpl: tmpl, stops: []int{id}, added: tok.AddedTokens(),
		opts: chattemplate.Options{AddGenerationPrompt: true, Tools: o.Tools, EnableThinking: o.EnableThinking}}
	sort.SliceStable(t.added, func(i, j int) bool { return len(t.added[i]) > len(t.added[j]) })
	for _, a := range t.added {
		t.first[a[0]] = true
	}
	// The generation prompt must end in template text, never inside a
	// message: the assembler appends the sample after it.
	if _, err := t.Render([]Message{{Role: "user", Content: "x"}}); err != nil {
		return nil, err
	}
	return t, nil
}

// LoadTemplate reads a model directory: tokenizer.json and
// tokenizer_config.json (its chat_template and eos_token).
func LoadTemplate(dir string, o TemplateOptions) (*Template, error) {
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	tmpl, err := chattemplate.Load(dir)
	if err != nil {
		return nil, err
	}
	return NewTemplate(tok, tmpl, o)
}

func (t *Template) Tokenizer() tokenizer.Tokenizer { return t.tok }
func (t *Template) Stops() []int                   { return t.stops }
func (t *Template) ObservationRole() string        { return "tool" }
func (t *Template) Tools() []any                   { return t.opts.Tools }

// reply reads the text as the model writes it: its control tokens are
// the model's own.
func (t *Template) reply(text string) []int { return append(t.tok.Encode(text), t.stops[0]) }

// Render tokenises the rendering of msgs.
func (t *Template) Render(msgs []Message) ([]int, error) {
	esc, err := t.renderEscaped(msgs)
	if err != nil {
		return nil, err
	}
	return t.tokenize(esc), nil
}

// The escape of content that spells an added token: marker, then one
// private-use character naming it (or the marker again for a literal
// marker). The template passes both through untouched: neither is
// whitespace nor anything a template matches.
const (
	marker  = '\U0010FFFD'
	escBase = 0xF0000
)

// renderEscaped renders msgs with the added-token texts of every message
// but the assistant's escaped.
func (t *Template) renderEscaped(msgs []Message) (string, error) {
	esc := make([]Message, len(msgs))
	for i, m := range msgs {
		esc[i] = m
		if m.Role != "assistant" {
			esc[i].Content = t.escape(m.Content)
		}
	}
	return t.tmpl.Render(esc, t.opts)
}

func (t *Template) escape(s string) string {
	var b strings.Builder
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == "\U0010FFFD"[0] && strings.HasPrefix(s[i:], string(marker)) {
			b.WriteString(s[start:i])
			b.WriteString(string(marker) + string(marker))
			i += utf8.RuneLen(marker) - 1
			start = i + 1
			continue
		}
		if k := t.addedAt(s, i); k >= 0 {
			b.WriteString(s[start:i])
			b.WriteRune(marker)
			b.WriteRune(rune(escBase + k))
			i += len(t.added[k]) - 1
			start = i + 1
		}
	}
	if start == 0 {
		return s
	}
	b.WriteString(s[start:])
	return b.String()
}

// addedAt is the index of the longest added token at s[i:], or -1.
func (t *Template) addedAt(s string, i int) int {
	if !t.first[s[i]] {
		return -1
	}
	for k, a := range t.added {
		if strings.HasPrefix(s[i:], a) {
			return k
		}
	}
	return -1
}

// unescape is the real text of an escaped rendering.
func (t *Template) unescape(s string) string {
	if !strings.ContainsRune(s, marker) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if r != marker || i >= len(s) {
			b.WriteString(string(s[i-n : i]))
			continue
		}
		k, m := utf8.DecodeRuneInString(s[i:])
		i += m
		if k == marker {
			b.WriteRune(marker)
		} else if j := int(k) - escBase; j >= 0 && j < len(t.added) {
			b.WriteString(t.added[j])
		} else {
			b.WriteString(string(s[i-n-m : i]))
		}
	}
	return b.String()
}

// tokenize is the library's encoding of an escaped rendering: split at the
// added tokens the template wrote, each segment between them (unescaped)
// encoded as ordinary text.
func (t *Template) tokenize(esc string) []int {
	var out []int
	start := 0
	for i := 0; i < len(esc); i++ {
		if k := t.addedAt(esc, i); k >= 0 {
			if i > start {
				out = append(out, t.tok.EncodeOrdinary(t.unescape(esc[start:i]))...)
			}
			id, _ := t.tok.SpecialID(t.added[k])
			out = append(out, id)
			i += len(t.added[k]) - 1
			start = i + 1
		}
	}
	if start < len(esc) {
		out = append(out, t.tok.EncodeOrdinary(t.unescape(esc[start:]))...)
	}
	return out
}

// escapedOffset is the offset in esc at which the first n bytes of its
// unescaped text end, or -1 when n falls inside an escape.
func (t *Template) escapedOffset(esc string, n int) int {
	real := 0
	for i := 0; i < len(esc); {
		if real == n {
			return i
		}
		if real > n {
			return -1
		}
		r, w := utf8.DecodeRuneInString(esc[i:])
		if r == marker && i+w < len(esc) {
			k, m := utf8.DecodeRuneInString(esc[i+w:])
			switch j := int(k) - escBase; {
			case k == marker:
				real += w
			case j >= 0 && j < len(t.added):
				real += len(t.added[j])
			default:
				real += w + m
			}
			i += w + m
			continue
		}
		real += w
		i += w
	}
	if real == n {
		return len(esc)
	}
	return -1
}

// Chat is the rendering c.Model chooses for a policy whose checkpoint
// holds tok. Model.Tokenizer, when set, names a model directory whose
// template and tokenizer are loaded once per process, and whose tokenizer
// files must be the checkpoint's (it may add those the checkpoint lacks,
// its template above all); else a Hugging Face
// tokenizer renders with the template its checkpoint carries
// (tokenizer_config.json), and t1's own tokenizer with t1's template.
func (c Config) Chat(tok tokenizer.Tokenizer) (Chat, error) {
	m := c.withDefaults().Model
	f, err := NewFormat(m.ActionFormat)
	if err != nil {
		return nil, err
	}
	o := TemplateOptions{Tools: f.Tools()}
	if m.Thinking != "template" {
		on := m.Thinking == "on"
		o.EnableThinking = &on
	}
	if m.Tokenizer != "" {
		l, err := loadTemplate(m.Tokenizer, f.Name(), m.Thinking, o)
		if err != nil {
			return nil, err
		}
		if err := l.agrees(m.Tokenizer, tok); err != nil {
			return nil, err
		}
		return l.t, nil
	}
	switch t := tok.(type) {
	case *moe.HFTokenizer:
		cfg, ok := t.File(moe.TokenizerConfigFile)
		if !ok {
			return nil, fmt.Errorf("agent: the policy's checkpoint has a Hugging Face tokenizer but no %s with its chat template: add the model's %s to the checkpoint, or set stages.rollout.model.tokenizer", moe.TokenizerConfigFile, moe.TokenizerConfigFile)
		}
		tmpl, err := chattemplate.Parse(cfg)
		if err != nil {
			return nil, fmt.Errorf("agent: the policy's checkpoint: %w", err)
		}
		return NewTemplate(t, tmpl, o)
	case *moe.Tokenizer:
		if f.Tools() != nil {
			return nil, fmt.Errorf("agent: action format %s needs the model's own chat template: set stages.rollout.model.tokenizer, or use a checkpoint that carries its model's tokenizer files", f.Name())
		}
		if m.Thinking != "template" {
			return nil, fmt.Errorf("agent: t1's own template has no thinking: set stages.rollout.model.thinking: template, or use the model's own template")
		}
		own, err := moe.NewChat(t)
		if err != nil {
			return nil, err
		}
		return OwnChat(own), nil
	}
	return nil, fmt.Errorf("agent: no chat rendering for a %T: want t1's tokenizer or a Hugging Face model's (moe.LoadTokenizer)", tok)
}

// loadTemplate is the template of a model directory, loaded once per
// process, with the directory's tokenizer files.
func loadTemplate(dir, format, thinking string, o TemplateOptions) (*dirTemplate, error) {
	key := fmt.Sprintf("%s\x00%s\x00%s", dir, format, thinking)
	templates.mu.Lock()
	defer templates.mu.Unlock()
	if l, ok := templates.m[key]; ok {
		return l, nil
	}
	t, err := LoadTemplate(dir, o)
	if err != nil {
		return nil, fmt.Errorf("stages.rollout.model.tokenizer: %w", err)
	}
	files, err := moe.TokenizerDirFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("stages.rollout.model.tokenizer: %w", err)
	}
	l := &dirTemplate{t: t, files: files}
	templates.m[key] = l
	return l, nil
}

// dirTemplate is a model directory's template and its tokenizer files.
type dirTemplate struct {
	t     *Template
	files map[string][]byte
}

// agrees refuses a policy whose checkpoint's tokenizer (tok) is not the
// directory's (moe.TokenizerMismatch): its ids would be rendered with
// another model's template and tokenizer, which no TITO repair can see.
func (l *dirTemplate) agrees(dir string, tok tokenizer.Tokenizer) error {
	files, err := moe.TokenizerFilesOf(tok)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	f := moe.TokenizerMismatch(files, l.files)
	if f == "" {
		return nil
	}
	hint := ""
	if _, own := tok.(*moe.Tokenizer); own {
		hint = " (the policy holds t1's own tokenizer: set inference.checkpoint to the model's directory)"
	}
	return fmt.Errorf("agent: stages.rollout.model.tokenizer %s and the policy's checkpoint disagree on %s%s: point both at the same model, or leave stages.rollout.model.tokenizer empty to use the checkpoint's own files", dir, f, hint)
}

var templates = struct {
	mu sync.Mutex
	m  map[string]*dirTemplate
}{m: map[string]*dirTemplate{}}
