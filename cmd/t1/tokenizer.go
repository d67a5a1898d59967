package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/chattemplate"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/tokenizer"
)

const tokenizerFlagHelp = "directory with tokenizer.json, or the file (default: t1's own tokenizer)"

func tokenizerCmd(g *globals) *cobra.Command {
	var encDir, decDir, renderDir string
	var r chattemplate.Files
	encode := leaf("encode [TEXT...] --tokenizer DIR", "Print the token ids and pieces of TEXT (the arguments joined by spaces, else standard input)", tokenizer.EncodeHelp, nil,
		func(cmd *cobra.Command, args []string) error {
			tok, text, err := tokenizerAndInput(cmd, encDir, args)
			if err != nil {
				return err
			}
			toks, err := tokenizer.Tokenize(tok, "", text)
			return g.show(cmd, toks, err)
		})
	decode := leaf("decode [ID...] --tokenizer DIR", "Write the bytes the ids stand for (ids as arguments, else from standard input; spaces or commas between)", tokenizer.DecodeHelp, nil,
		func(cmd *cobra.Command, args []string) error {
			tok, in, err := tokenizerAndInput(cmd, decDir, args)
			if err != nil {
				return err
			}
			ids, err := tokenizer.ParseIDs(in)
			if err != nil {
				return err
			}
			d, err := tokenizer.Decode(tok, ids)
			return g.show(cmd, d, err)
		})
	render := leaf("render --tokenizer DIR --messages FILE.json", "Render a conversation with the model's chat template and print its token ids and pieces", tokenizer.RenderHelp, cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			if renderDir == "" {
				return fmt.Errorf("--tokenizer is required: a Hugging Face model directory with tokenizer.json and tokenizer_config.json")
			}
			tok, err := moe.TokenizerAt(renderDir)
			if err != nil {
				return err
			}
			r.Config = renderDir
			if st, err := os.Stat(renderDir); err == nil && !st.IsDir() {
				r.Config = filepath.Dir(renderDir)
			}
			text, err := renderFiles(cmd, r)
			if err != nil {
				return err
			}
			toks, err := tokenizer.Tokenize(tok, text, text)
			return g.show(cmd, toks, err)
		})
	encode.Flags().StringVar(&encDir, "tokenizer", "", tokenizerFlagHelp)
	decode.Flags().StringVar(&decDir, "tokenizer", "", tokenizerFlagHelp)
	render.Flags().StringVar(&renderDir, "tokenizer", "", "model directory with tokenizer.json and tokenizer_config.json")
	return group("tokenizer", "Encode and decode with a tokenizer: t1's own or a Hugging Face tokenizer.json", tokenizer.Help,
		encode, decode, bindRender(render, &r))
}

// tokenizerAndInput loads the tokenizer of dir and reads the command's
// input: its arguments joined by spaces, else standard input.
func tokenizerAndInput(cmd *cobra.Command, dir string, args []string) (tokenizer.Tokenizer, string, error) {
	tok, err := moe.TokenizerAt(dir)
	if err != nil || len(args) > 0 {
		return tok, strings.Join(args, " "), err
	}
	b, err := io.ReadAll(cmd.InOrStdin())
	return tok, string(b), err
}

func chatCmd(g *globals) *cobra.Command {
	var r chattemplate.Files
	render := leaf("render --tokenizer-config FILE --messages FILE.json", "Render a conversation with the model's chat template, as transformers' apply_chat_template does", chattemplate.RenderHelp, cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			if r.Config == "" {
				return fmt.Errorf("--tokenizer-config and --messages are required")
			}
			text, err := renderFiles(cmd, r)
			return g.show(cmd, &chattemplate.Rendered{Template: r.Config, Text: text}, err)
		})
	render.Flags().StringVar(&r.Config, "tokenizer-config", "", "tokenizer_config.json, or the directory holding it")
	return group("chat", "A model's own chat template (Hugging Face tokenizer_config.json)", "", bindRender(render, &r))
}

// bindRender binds the flags of a chat-template rendering but the
// template's path, which each command names its own way.
func bindRender(cmd *cobra.Command, r *chattemplate.Files) *cobra.Command {
	f := cmd.Flags()
	f.StringVar(&r.Messages, "messages", "", "the conversation: a JSON array of messages")
	f.StringVar(&r.Tools, "tools", "", "a JSON array of tool schemas")
	f.BoolVar(&r.AddGenerationPrompt, "add-generation-prompt", false, "end with the opening of an assistant turn")
	f.Bool("enable-thinking", true, "pass enable_thinking (only when given; Qwen3: false writes an empty <think></think>)")
	f.StringVar(&r.Template, "template", "", "the template's name when the config has several (default: tool_use with tools, else default)")
	f.StringArrayVar(&r.Kwargs, "kwarg", nil, "a further template variable, name=JSON (repeatable)")
	return cmd
}

// renderFiles renders r, passing enable_thinking only when the flag was
// given.
func renderFiles(cmd *cobra.Command, r chattemplate.Files) (string, error) {
	if cmd.Flags().Changed("enable-thinking") {
		on, _ := cmd.Flags().GetBool("enable-thinking")
		r.EnableThinking = &on
	}
	return r.Render()
}
