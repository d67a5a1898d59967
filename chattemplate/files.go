package chattemplate

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// RenderHelp is what `t1 chat render` says of itself.
const RenderHelp = `Renders the messages (a JSON array of {role, content, reasoning_content, tool_calls,
tool_call_id, name}; roles system, user, assistant, tool) with the chat_template of a Hugging Face
tokenizer_config.json (or the chat_template.jinja beside it), and prints the text exactly, with no
newline added. --tools is a JSON array of tool schemas; --kwarg name=JSON passes a further template
variable. Key order is kept as written. --json prints {"template", "text"}.`

// Files names a rendering by the files that hold it, as a command line
// gives them.
type Files struct {
	// Config is tokenizer_config.json or its directory.
	Config string
	// Messages is a JSON array of messages; Tools, when set, one of tool
	// schemas.
	Messages, Tools     string
	AddGenerationPrompt bool
	// Template names one of several templates.
	Template string
	// EnableThinking is passed only when set.
	EnableThinking *bool
	// Kwargs are further template variables, each name=JSON.
	Kwargs []string
}

// Render is the text the template makes of the conversation.
func (f Files) Render() (string, error) {
	if f.Messages == "" {
		return "", fmt.Errorf("--messages is required")
	}
	tmpl, err := Load(f.Config)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(f.Messages)
	if err != nil {
		return "", err
	}
	msgs, err := ParseMessages(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.Messages, err)
	}
	o := Options{AddGenerationPrompt: f.AddGenerationPrompt, Template: f.Template, EnableThinking: f.EnableThinking}
	if f.Tools != "" {
		data, err := os.ReadFile(f.Tools)
		if err != nil {
			return "", err
		}
		var tools []json.RawMessage
		if err := json.Unmarshal(data, &tools); err != nil {
			return "", fmt.Errorf("%s: want a JSON array of tool schemas: %w", f.Tools, err)
		}
		o.Tools = []any{}
		for _, t := range tools {
			o.Tools = append(o.Tools, t)
		}
	}
	for _, kv := range f.Kwargs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || !json.Valid([]byte(v)) {
			return "", fmt.Errorf("--kwarg %q: want name=JSON (a string is written \"…\")", kv)
		}
		if o.Kwargs == nil {
			o.Kwargs = map[string]any{}
		}
		o.Kwargs[k] = json.RawMessage(v)
	}
	return tmpl.Render(msgs, o)
}

// Rendered is a rendering as `t1 chat render` prints it.
type Rendered struct {
	Template string `json:"template"`
	Text     string `json:"text"`
}

// WriteText writes the text exactly, with no newline added.
func (r *Rendered) WriteText(w io.Writer) error {
	_, err := io.WriteString(w, r.Text)
	return err
}
