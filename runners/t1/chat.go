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
	var cfgPath, msgsPath, toolsPath, name string
	var agp, thinking bool
	var kwargs []string
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
			if cfgPath == "" || msgsPath == "" {
				return fmt.Errorf("--tokenizer-config and --messages are required")
			}
			tmpl, err := chattemplate.Load(cfgPath)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(msgsPath)
			if err != nil {
				return err
			}
			msgs, err := chattemplate.ParseMessages(data)
			if err != nil {
				return fmt.Errorf("%s: %w", msgsPath, err)
			}
			o := chattemplate.Options{AddGenerationPrompt: agp, Template: name}
			if cmd.Flags().Changed("enable-thinking") {
				o.EnableThinking = &thinking
			}
			if toolsPath != "" {
				data, err := os.ReadFile(toolsPath)
				if err != nil {
					return err
				}
				var tools []json.RawMessage
				if err := json.Unmarshal(data, &tools); err != nil {
					return fmt.Errorf("%s: want a JSON array of tool schemas: %w", toolsPath, err)
				}
				o.Tools = []any{}
				for _, t := range tools {
					o.Tools = append(o.Tools, t)
				}
			}
			for _, kv := range kwargs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" || !json.Valid([]byte(v)) {
					return fmt.Errorf("--kwarg %q: want name=JSON (a string is written \"…\")", kv)
				}
				if o.Kwargs == nil {
					o.Kwargs = map[string]any{}
				}
				o.Kwargs[k] = json.RawMessage(v)
			}
			text, err := tmpl.Render(msgs, o)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd, struct {
					Template string `json:"template"`
					Text     string `json:"text"`
				}{cfgPath, text})
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), text)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "tokenizer-config", "", "tokenizer_config.json, or the directory holding it")
	f.StringVar(&msgsPath, "messages", "", "the conversation: a JSON array of messages")
	f.StringVar(&toolsPath, "tools", "", "a JSON array of tool schemas")
	f.BoolVar(&agp, "add-generation-prompt", false, "end with the opening of an assistant turn")
	f.BoolVar(&thinking, "enable-thinking", true, "pass enable_thinking (only when given; Qwen3: false writes an empty <think></think>)")
	f.StringVar(&name, "template", "", "the template's name when the config has several (default: tool_use with tools, else default)")
	f.StringArrayVar(&kwargs, "kwarg", nil, "a further template variable, name=JSON (repeatable)")
	return cmd
}
