package chattemplate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Template is a model's chat template (one, or several by name) compiled,
// with the special tokens the template may refer to. It is safe for
// concurrent use.
type Template struct {
	named  map[string]*compiled
	tokens map[string]jinja.Value
}

type compiled struct {
	name string
	t    *jinja.Template
	// spellsSeparator: the source has the text \u2028 or \u2029, which
	// would make the engine's escapes of those characters ambiguous.
	spellsSeparator bool
}

// Load reads a Hugging Face tokenizer_config.json (a file, or the directory
// that holds it). A model whose config carries no chat_template may keep it
// beside the config in chat_template.jinja, as recent transformers writes it.
func Load(path string) (*Template, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "tokenizer_config.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	sources, tokens, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("chat template: %s: %w", path, err)
	}
	if len(sources) == 0 {
		side := filepath.Join(filepath.Dir(path), "chat_template.jinja")
		src, err := os.ReadFile(side)
		if err != nil {
			return nil, fmt.Errorf("chat template: %s has no chat_template and there is no %s beside it: this tokenizer cannot render conversations", path, side)
		}
		sources["default"] = string(src)
	}
	return build(sources, tokens)
}

// Parse reads the contents of a tokenizer_config.json. chat_template is
// either one template or a list of {"name", "template"}.
func Parse(data []byte) (*Template, error) {
	sources, tokens, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	if len(sources) == 0 {
		return nil, fmt.Errorf("chat template: tokenizer_config.json has no chat_template: this tokenizer cannot render conversations")
	}
	return build(sources, tokens)
}

// The attributes transformers puts in special_tokens_map, which
// apply_chat_template passes to every template.
var tokenAttrs = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token", "additional_special_tokens"}

// parseConfig returns the template sources by name (none when the config
// has no chat_template) and the special tokens.
func parseConfig(data []byte) (map[string]string, map[string]jinja.Value, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, nil, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	tokens, err := specialTokens(fields)
	if err != nil {
		return nil, nil, err
	}
	sources := map[string]string{}
	ct := fields["chat_template"]
	if len(ct) == 0 || string(ct) == "null" {
		return sources, tokens, nil
	}
	var one string
	if err := json.Unmarshal(ct, &one); err == nil {
		sources["default"] = one
		return sources, tokens, nil
	}
	var list []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(ct, &list); err != nil {
		return nil, nil, fmt.Errorf("chat_template: want a string or a list of {\"name\", \"template\"}: %w", err)
	}
	for i, e := range list {
		if e.Name == nil || e.Template == nil {
			return nil, nil, fmt.Errorf("chat_template[%d]: needs both name and template", i)
		}
		if _, dup := sources[*e.Name]; dup {
			return nil, nil, fmt.Errorf("chat_template[%d]: the name %q appears twice", i, *e.Name)
		}
		sources[*e.Name] = *e.Template
	}
	return sources, tokens, nil
}

// New compiles one template source with the given special tokens
// (bos_token, eos_token, …), for a template that is not in a
// tokenizer_config.json.
func New(source string, tokens map[string]string) (*Template, error) {
	vals := map[string]jinja.Value{}
	for k, v := range tokens {
		vals[k] = jinja.NewString(v)
	}
	return build(map[string]string{"default": source}, vals)
}

func build(sources map[string]string, tokens map[string]jinja.Value) (*Template, error) {
	t := &Template{named: map[string]*compiled{}, tokens: tokens}
	for name, src := range sources {
		if err := checkSource(src); err != nil {
			return nil, fmt.Errorf("chat template %q: %w", name, err)
		}
		jt, err := jinja.Compile(src)
		if err != nil {
			return nil, fmt.Errorf("chat template %q does not compile: %w", name, err)
		}
		t.named[name] = &compiled{name: name, t: jt, spellsSeparator: spellsSeparator(src)}
	}
	return t, nil
}

// Names lists the template's names, sorted ("default" for a single one).
func (t *Template) Names() []string {
	var out []string
	for n := range t.named {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// pick chooses a template as transformers does: the one named, else
// "tool_use" when tools are given and there is one, else "default".
func (t *Template) pick(name string, tools bool) (*compiled, error) {
	if name != "" {
		c, ok := t.named[name]
		if !ok {
			return nil, fmt.Errorf("chat template: no template named %q (have %s)", name, strings.Join(t.Names(), ", "))
		}
		return c, nil
	}
	if c, ok := t.named["tool_use"]; ok && tools {
		return c, nil
	}
	if c, ok := t.named["default"]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("chat template: several templates (%s) and none named default: choose one by name", strings.Join(t.Names(), ", "))
}

// specialTokens reads the tokens as special_tokens_map holds them: a string,
// or an AddedToken object's content; unset and empty ones are left out, as
// transformers leaves them out.
func specialTokens(fields map[string]json.RawMessage) (map[string]jinja.Value, error) {
	out := map[string]jinja.Value{}
	for _, attr := range tokenAttrs {
		raw, ok := fields[attr]
		if !ok || string(raw) == "null" {
			continue
		}
		if attr == "additional_special_tokens" {
			var list []json.RawMessage
			if err := json.Unmarshal(raw, &list); err != nil {
				return nil, fmt.Errorf("%s: want a list: %w", attr, err)
			}
			var items []jinja.Value
			for i, r := range list {
				s, err := tokenContent(r)
				if err != nil {
					return nil, fmt.Errorf("%s[%d]: %w", attr, i, err)
				}
				items = append(items, jinja.NewString(s))
			}
			if len(items) > 0 {
				out[attr] = jinja.NewList(items)
			}
			continue
		}
		s, err := tokenContent(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", attr, err)
		}
		if s != "" {
			out[attr] = jinja.NewString(s)
		}
	}
	return out, nil
}

func tokenContent(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var added struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &added); err != nil || added.Content == nil {
		return "", fmt.Errorf("want a string or an AddedToken object with content")
	}
	return *added.Content, nil
}

// Token is the text of a special token the config names (eos_token,
// bos_token, …), when it names one as a string.
func (t *Template) Token(name string) (string, bool) {
	v, ok := t.tokens[name]
	if !ok || !v.IsString() {
		return "", false
	}
	return v.AsString(), true
}
