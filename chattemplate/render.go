package chattemplate

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Options are the arguments of apply_chat_template besides the messages.
type Options struct {
	// AddGenerationPrompt ends the rendering with the opening of an
	// assistant turn.
	AddGenerationPrompt bool
	// EnableThinking, when set, is passed as enable_thinking (Qwen3: false
	// writes an empty <think></think> after the generation prompt). Unset,
	// the template sees it undefined.
	EnableThinking *bool
	// Tools are JSON schemas, each marshalled to JSON and shown to the
	// template in that key order (a json.RawMessage or a struct keeps its
	// order). Nil passes tools=None; an empty non-nil slice passes [].
	Tools []any
	// Template names one of several templates; empty chooses as
	// transformers does ("tool_use" with tools if there is one, else
	// "default").
	Template string
	// Kwargs are further template variables (like **kwargs), marshalled as
	// Tools are. They override special tokens of the same name.
	Kwargs map[string]any
	// Now is the clock of strftime_now (default time.Now, as transformers).
	Now func() time.Time
}

// RaiseError is a template's own refusal, raise_exception(message): the
// message is the template's, verbatim.
type RaiseError struct {
	Template string
	Message  string
}

func (e *RaiseError) Error() string {
	return fmt.Sprintf("chat template %q refused the conversation: %s", e.Template, e.Message)
}

// reserved are the variables Render sets itself.
var reserved = map[string]string{
	"messages":              "the messages argument",
	"tools":                 "Options.Tools",
	"documents":             "(always None)",
	"add_generation_prompt": "Options.AddGenerationPrompt",
	"enable_thinking":       "Options.EnableThinking",
	"raise_exception":       "(the environment)",
	"strftime_now":          "(the environment, Options.Now)",
}

// Render renders a conversation as transformers' apply_chat_template(
// messages, tools=…, add_generation_prompt=…, tokenize=False, **kwargs)
// renders it: in an environment with trim_blocks, lstrip_blocks and loop
// controls, raise_exception and strftime_now, tojson as json.dumps without
// ASCII escaping, the special tokens as variables.
func (t *Template) Render(msgs []Message, o Options) (string, error) {
	c, err := t.pick(o.Template, o.Tools != nil)
	if err != nil {
		return "", err
	}
	data, err := t.values(msgs, o)
	if err != nil {
		return "", err
	}
	separators := false
	for k, v := range data {
		if err := checkValue(v, k); err != nil {
			return "", fmt.Errorf("chat template %q: %w", c.name, err)
		}
		separators = separators || anyString(v, hasSeparator)
	}
	if separators && (c.spellsSeparator || anySpelled(data)) {
		return "", fmt.Errorf("chat template %q: a value holds U+2028 or U+2029 while the template or a value spells \\u2028 or \\u2029 as text: the engine's tojson escapes could not be told apart", c.name)
	}
	return c.render(data)
}

// The engine's tojson escapes U+2028 and U+2029 (Go's JSON encoder always
// does), json.dumps(ensure_ascii=False) writes them out. When no value and
// no template text spells the escape itself, every \u2028 in the output is
// such an escape, and is written back as the character.
func hasSeparator(s string) bool { return strings.ContainsAny(s, "\u2028\u2029") }

func spellsSeparator(s string) bool {
	return strings.Contains(s, `\u2028`) || strings.Contains(s, `\u2029`)
}

func anySpelled(data map[string]jinja.Value) bool {
	for _, v := range data {
		if anyString(v, spellsSeparator) {
			return true
		}
	}
	return false
}

func unescapeSeparators(s string) string {
	return strings.NewReplacer(`\u2028`, "\u2028", `\u2029`, "\u2029").Replace(s)
}

// render renders checked values (Render's checks make its output Python's).
func (c *compiled) render(data map[string]jinja.Value) (string, error) {
	out, err := c.t.RenderValues(data)
	if err != nil {
		var re *RaiseError
		if errors.As(err, &re) {
			re.Template = c.name
			return "", re
		}
		return "", fmt.Errorf("chat template %q failed: %w", c.name, err)
	}
	for _, v := range data {
		if anyString(v, hasSeparator) {
			return unescapeSeparators(out), nil
		}
	}
	return out, nil
}

// values builds the template's variables.
func (t *Template) values(msgs []Message, o Options) (map[string]jinja.Value, error) {
	if err := validate(msgs); err != nil {
		return nil, err
	}
	data := map[string]jinja.Value{}
	for k, v := range t.tokens {
		data[k] = v
	}
	for k, x := range o.Kwargs {
		if by, ok := reserved[k]; ok {
			return nil, fmt.Errorf("chat template: kwarg %q is set by %s", k, by)
		}
		v, err := toValue(x)
		if err != nil {
			return nil, fmt.Errorf("chat template: kwarg %q: %w", k, err)
		}
		data[k] = v
	}
	m, err := toValue(msgs)
	if err != nil {
		return nil, fmt.Errorf("chat template: messages: %w", err)
	}
	data["messages"] = m
	data["tools"] = jinja.None()
	if o.Tools != nil {
		tools, err := toValue(o.Tools)
		if err != nil {
			return nil, fmt.Errorf("chat template: tools: %w", err)
		}
		data["tools"] = tools
	}
	data["documents"] = jinja.None()
	data["add_generation_prompt"] = jinja.NewBool(o.AddGenerationPrompt)
	if o.EnableThinking != nil {
		data["enable_thinking"] = jinja.NewBool(*o.EnableThinking)
	}
	data["raise_exception"] = jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 {
			return jinja.Undefined(), fmt.Errorf("raise_exception takes one message")
		}
		msg := args[0].String()
		if args[0].IsString() {
			msg = args[0].AsString()
		}
		return jinja.Undefined(), &RaiseError{Message: msg}
	})
	now := o.Now
	if now == nil {
		now = time.Now
	}
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), fmt.Errorf("strftime_now takes one format string")
		}
		s, err := strftime(now(), args[0].AsString())
		if err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewString(s), nil
	})
	return data, nil
}

// tojsonCall finds tojson filters with arguments.
var tojsonCall = regexp.MustCompile(`tojson\s*\(`)

// checkSource refuses templates that call tojson with arguments the engine
// does not honour: it sorts keys and escapes HTML under indent, and ignores
// sort_keys and ensure_ascii, where transformers' tojson passes them all to
// json.dumps. separators is honoured.
func checkSource(src string) error {
	for _, loc := range tojsonCall.FindAllStringIndex(src, -1) {
		args, ok := callArgs(src[loc[1]:])
		if !ok {
			continue // the compiler reports the syntax error
		}
		for _, a := range args {
			a = strings.TrimSpace(a)
			name, _, kw := strings.Cut(a, "=")
			if a == "" || kw && strings.TrimSpace(name) == "separators" {
				continue
			}
			return fmt.Errorf("tojson(%s) is not supported: the engine (github.com/ardanlabs/jinja v1.8.0) honours only separators=, so indent, sort_keys and ensure_ascii would not render as transformers renders them", strings.Join(args, ","))
		}
	}
	return nil
}

// callArgs splits the arguments of a call whose opening parenthesis precedes
// s at the commas outside brackets and quotes, up to the closing parenthesis.
func callArgs(s string) ([]string, bool) {
	var out []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == '\\' {
				i++
			} else if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '(' || ch == '[' || ch == '{':
			depth++
		case ch == ')' || ch == ']' || ch == '}':
			if depth == 0 {
				return append(out, s[start:i]), true
			}
			depth--
		case ch == ',' && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return nil, false
}
