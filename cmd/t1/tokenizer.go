package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/chattemplate"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/tokenizer"
)

func tokenizerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokenizer",
		Short: "Encode and decode with a tokenizer: t1's own or a Hugging Face tokenizer.json",
		Long:  tokenizer.Help,
	}
	cmd.AddCommand(tokenizerEncodeCmd(g), tokenizerDecodeCmd(g), tokenizerRenderCmd(g))
	return cmd
}

func tokenizerEncodeCmd(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "encode [TEXT...] --tokenizer DIR",
		Short: "Print the token ids and pieces of TEXT (the arguments joined by spaces, else standard input)",
		Long:  tokenizer.EncodeHelp,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := moe.TokenizerAt(dir)
			if err != nil {
				return err
			}
			text, err := argsOrStdin(cmd, args)
			if err != nil {
				return err
			}
			return printTokens(cmd, g, tok, "", text)
		},
	}
	cmd.Flags().StringVar(&dir, "tokenizer", "", "directory with tokenizer.json, or the file (default: t1's own tokenizer)")
	return cmd
}

func tokenizerDecodeCmd(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "decode [ID...] --tokenizer DIR",
		Short: "Write the bytes the ids stand for (ids as arguments, else from standard input; spaces or commas between)",
		Long:  tokenizer.DecodeHelp,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := moe.TokenizerAt(dir)
			if err != nil {
				return err
			}
			in, err := argsOrStdin(cmd, args)
			if err != nil {
				return err
			}
			ids, err := tokenizer.ParseIDs(in)
			if err != nil {
				return err
			}
			text, err := tok.Decode(ids)
			if err != nil {
				return err
			}
			return g.emitErr(cmd, struct {
				Text string `json:"text"`
				UTF8 bool   `json:"utf8"`
			}{text, utf8.ValidString(text)}, func(w io.Writer) error {
				_, err := io.WriteString(w, text)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&dir, "tokenizer", "", "directory with tokenizer.json, or the file (default: t1's own tokenizer)")
	return cmd
}

func tokenizerRenderCmd(g *globals) *cobra.Command {
	var dir string
	var r chattemplate.Files
	cmd := &cobra.Command{
		Use:   "render --tokenizer DIR --messages FILE.json",
		Short: "Render a conversation with the model's chat template and print its token ids and pieces",
		Long:  tokenizer.RenderHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--tokenizer is required: a Hugging Face model directory with tokenizer.json and tokenizer_config.json")
			}
			tok, err := moe.TokenizerAt(dir)
			if err != nil {
				return err
			}
			r.Config = dir
			if st, err := os.Stat(dir); err == nil && !st.IsDir() {
				r.Config = filepath.Dir(dir)
			}
			text, err := render(cmd, r)
			if err != nil {
				return err
			}
			return printTokens(cmd, g, tok, text, text)
		},
	}
	cmd.Flags().StringVar(&dir, "tokenizer", "", "model directory with tokenizer.json and tokenizer_config.json")
	bindRender(cmd, &r)
	return cmd
}

// printTokens encodes text and prints one line per token, or JSON with the
// ids and pieces (and shown, when not empty, as "text").
func printTokens(cmd *cobra.Command, g *globals, tok tokenizer.Tokenizer, shown, text string) error {
	ids := tok.Encode(text)
	pieces, err := tokenizer.Pieces(tok, ids)
	if err != nil {
		return err
	}
	return g.emitErr(cmd, struct {
		Text   string   `json:"text,omitempty"`
		IDs    []int    `json:"ids"`
		Pieces []string `json:"pieces"`
	}{shown, ids, pieces}, func(w io.Writer) error { return tokenizer.WriteTokens(w, ids, pieces) })
}

func argsOrStdin(cmd *cobra.Command, args []string) (string, error) {
	if len(args) > 0 {
		return strings.Join(args, " "), nil
	}
	b, err := io.ReadAll(cmd.InOrStdin())
	return string(b), err
}

func chatCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "chat", Short: "A model's own chat template (Hugging Face tokenizer_config.json)"}
	var r chattemplate.Files
	rc := &cobra.Command{
		Use:   "render --tokenizer-config FILE --messages FILE.json",
		Short: "Render a conversation with the model's chat template, as transformers' apply_chat_template does",
		Long:  chattemplate.RenderHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if r.Config == "" {
				return fmt.Errorf("--tokenizer-config and --messages are required")
			}
			text, err := render(cmd, r)
			if err != nil {
				return err
			}
			return g.emitErr(cmd, struct {
				Template string `json:"template"`
				Text     string `json:"text"`
			}{r.Config, text}, func(w io.Writer) error {
				_, err := fmt.Fprint(w, text)
				return err
			})
		},
	}
	rc.Flags().StringVar(&r.Config, "tokenizer-config", "", "tokenizer_config.json, or the directory holding it")
	bindRender(rc, &r)
	cmd.AddCommand(rc)
	return cmd
}

// bindRender binds the flags of a chat-template rendering but the
// template's path, which each command names its own way.
func bindRender(cmd *cobra.Command, r *chattemplate.Files) {
	f := cmd.Flags()
	f.StringVar(&r.Messages, "messages", "", "the conversation: a JSON array of messages")
	f.StringVar(&r.Tools, "tools", "", "a JSON array of tool schemas")
	f.BoolVar(&r.AddGenerationPrompt, "add-generation-prompt", false, "end with the opening of an assistant turn")
	f.Bool("enable-thinking", true, "pass enable_thinking (only when given; Qwen3: false writes an empty <think></think>)")
	f.StringVar(&r.Template, "template", "", "the template's name when the config has several (default: tool_use with tools, else default)")
	f.StringArrayVar(&r.Kwargs, "kwarg", nil, "a further template variable, name=JSON (repeatable)")
}

// render renders r, passing enable_thinking only when the flag was given.
func render(cmd *cobra.Command, r chattemplate.Files) (string, error) {
	if cmd.Flags().Changed("enable-thinking") {
		on, _ := cmd.Flags().GetBool("enable-thinking")
		r.EnableThinking = &on
	}
	return r.Render()
}
