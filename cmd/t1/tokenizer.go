package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/chattemplate"
	"github.com/t1pipe/t1/exit"
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
				return exit.Configf("--tokenizer is required: a Hugging Face model directory with tokenizer.json and tokenizer_config.json")
			}
			tok, err := moe.TokenizerAt(renderDir)
			if err != nil {
				return err
			}
			r.Config = renderDir
			if st, err := os.Stat(renderDir); err == nil && !st.IsDir() {
				r.Config = filepath.Dir(renderDir)
			}
			text, err := r.Render()
			if err != nil {
				return err
			}
			toks, err := tokenizer.Tokenize(tok, text, text)
			return g.show(cmd, toks, err)
		})
	encode.Flags().StringVar(&encDir, "tokenizer", "", tokenizerFlagHelp)
	decode.Flags().StringVar(&decDir, "tokenizer", "", tokenizerFlagHelp)
	render.Flags().StringVar(&renderDir, "tokenizer", "", "model directory with tokenizer.json and tokenizer_config.json")
	r.Bind(render.Flags())
	return group("tokenizer", "Encode and decode with a tokenizer: t1's own or a Hugging Face tokenizer.json", tokenizer.Help,
		encode, decode, render)
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
			if r.Config == "" || r.Messages == "" {
				return exit.Configf("--tokenizer-config and --messages are required")
			}
			text, err := r.Render()
			return g.show(cmd, &chattemplate.Rendered{Template: r.Config, Text: text}, err)
		})
	render.Flags().StringVar(&r.Config, "tokenizer-config", "", "tokenizer_config.json, or the directory holding it")
	r.Bind(render.Flags())
	return group("chat", "A model's own chat template (Hugging Face tokenizer_config.json)", "", render)
}
