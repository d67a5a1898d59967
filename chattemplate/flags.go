package chattemplate

import (
	"strconv"

	"github.com/spf13/pflag"
)

// Bind binds the flags of a rendering to f, but for the template's path,
// which each command names its own way.
func (f *Files) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.Messages, "messages", "", "the conversation: a JSON array of messages")
	fs.StringVar(&f.Tools, "tools", "", "a JSON array of tool schemas")
	fs.BoolVar(&f.AddGenerationPrompt, "add-generation-prompt", false, "end with the opening of an assistant turn")
	fs.Var(&thinking{f}, "enable-thinking", "pass enable_thinking (only when given; Qwen3: false writes an empty <think></think>)")
	fs.Lookup("enable-thinking").NoOptDefVal = "true"
	fs.StringVar(&f.Template, "template", "", "the template's name when the config has several (default: tool_use with tools, else default)")
	fs.StringArrayVar(&f.Kwargs, "kwarg", nil, "a further template variable, name=JSON (repeatable)")
}

// thinking sets EnableThinking only when the flag is given: a template
// told nothing renders as transformers does without the argument.
type thinking struct{ f *Files }

func (t *thinking) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err == nil {
		t.f.EnableThinking = &on
	}
	return err
}

func (t *thinking) String() string {
	if t.f == nil || t.f.EnableThinking == nil {
		return "true"
	}
	return strconv.FormatBool(*t.f.EnableThinking)
}

func (t *thinking) Type() string { return "bool" }
