package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/chattemplate"
)

func chatCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "A model's own chat template (Hugging Face tokenizer_config.json)",
	}
	cmd.AddCommand(chatRenderCmd(g))
	return cmd
}

func chatRenderCmd(g *globals) *cobra.Command {
	var r renderArgs
	cmd := &cobra.Command{
		Use:   "render --tokenizer-config FILE --messages FILE.json",
		Short: "Render a conversation with the model's chat template, as transformers' apply_chat_template does",
		Long: `Renders the messages (a JSON array of {role, content, reasoning_content, tool_calls,
tool_call_id, name}; roles system, user, assistant, tool) with the chat_template of a Hugging Face
tokenizer_config.json (or the chat_template.jinja beside it), and prints the text exactly, with no
newline added. --tools is a JSON array of tool schemas; --kwarg name=JSON passes a further template
variable. Key order is kept as written. --json prints {"template", "text"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r.cfgPath == "" {
				return fmt.Errorf("--tokenizer-config and --messages are required")
			}
			text, err := r.render(cmd)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd, struct {
					Template string `json:"template"`
					Text     string `json:"text"`
				}{r.cfgPath, text})
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), text)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.cfgPath, "tokenizer-config", "", "tokenizer_config.json, or the directory holding it")
	r.bind(cmd)
	return cmd
}

// renderArgs are the flags of a chat-template rendering but the template's
// path, which each command names its own way.
type renderArgs struct {
	cfgPath, msgsPath, toolsPath, name string
	agp, thinking                      bool
	kwargs                             []string
}

func (r *renderArgs) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&r.msgsPath, "messages", "", "the conversation: a JSON array of messages")
	f.StringVar(&r.toolsPath, "tools", "", "a JSON array of tool schemas")
	f.BoolVar(&r.agp, "add-generation-prompt", false, "end with the opening of an assistant turn")
	f.BoolVar(&r.thinking, "enable-thinking", true, "pass enable_thinking (only when given; Qwen3: false writes an empty <think></think>)")
	f.StringVar(&r.name, "template", "", "the template's name when the config has several (default: tool_use with tools, else default)")
	f.StringArrayVar(&r.kwargs, "kwarg", nil, "a further template variable, name=JSON (repeatable)")
}

// render is the text the template makes of the conversation.
func (r *renderArgs) render(cmd *cobra.Command) (string, error) {
	if r.msgsPath == "" {
		return "", fmt.Errorf("--messages is required")
	}
	tmpl, err := chattemplate.Load(r.cfgPath)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(r.msgsPath)
	if err != nil {
		return "", err
	}
	msgs, err := chattemplate.ParseMessages(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", r.msgsPath, err)
	}
	o := chattemplate.Options{AddGenerationPrompt: r.agp, Template: r.name}
	if cmd.Flags().Changed("enable-thinking") {
		o.EnableThinking = &r.thinking
	}
	if r.toolsPath != "" {
		data, err := os.ReadFile(r.toolsPath)
		if err != nil {
			return "", err
		}
		var tools []json.RawMessage
		if err := json.Unmarshal(data, &tools); err != nil {
			return "", fmt.Errorf("%s: want a JSON array of tool schemas: %w", r.toolsPath, err)
		}
		o.Tools = []any{}
		for _, t := range tools {
			o.Tools = append(o.Tools, t)
		}
	}
	for _, kv := range r.kwargs {
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
