package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/tokenizer"
)

func tokenizerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tokenizer",
		Short: "Encode and decode with a tokenizer: t1's own or a Hugging Face tokenizer.json",
		Long: `--tokenizer names a directory holding tokenizer.json (a Hugging Face model directory, or a
t1 checkpoint) or the file itself; without it, t1's default tokenizer is used. A Hugging Face
file must be a byte-level BPE (GPT-2, Qwen2/Qwen3, Llama 3 and kin); any feature t1 does not
implement exactly is refused with an error naming it.`,
	}
	cmd.AddCommand(tokenizerEncodeCmd(g), tokenizerDecodeCmd(g), tokenizerRenderCmd(g))
	return cmd
}

func tokenizerEncodeCmd(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "encode [TEXT...] --tokenizer DIR",
		Short: "Print the token ids and pieces of TEXT (the arguments joined by spaces, else standard input)",
		Long: `Prints one line per token: its index, id, and the bytes it stands for (quoted). Special and
added tokens written in the text become their one id. Nothing is added around the text (no
BOS or EOS). With --json: {"ids": [...], "pieces": [...]}, pieces as strings (bytes that are
not UTF-8 on their own, as in part of a character, show as U+FFFD there; decode them by id).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := loadTokenizer(dir)
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
		Long: `Writes exactly the bytes of the ids, with no newline added: a sequence cut inside a character
writes the bytes it holds. With --json: {"text": "...", "utf8": true|false}.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := loadTokenizer(dir)
			if err != nil {
				return err
			}
			in, err := argsOrStdin(cmd, args)
			if err != nil {
				return err
			}
			var ids []int
			for _, f := range strings.FieldsFunc(in, func(r rune) bool {
				return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' || r == '[' || r == ']'
			}) {
				id, err := strconv.Atoi(f)
				if err != nil {
					return fmt.Errorf("decode: %q is not a token id", f)
				}
				ids = append(ids, id)
			}
			text, err := tok.Decode(ids)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd, struct {
					Text string `json:"text"`
					UTF8 bool   `json:"utf8"`
				}{text, utf8.ValidString(text)})
			}
			_, err = io.WriteString(cmd.OutOrStdout(), text)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "tokenizer", "", "directory with tokenizer.json, or the file (default: t1's own tokenizer)")
	return cmd
}

func tokenizerRenderCmd(g *globals) *cobra.Command {
	var dir string
	var r renderArgs
	cmd := &cobra.Command{
		Use:   "render --tokenizer DIR --messages FILE.json",
		Short: "Render a conversation with the model's chat template and print its token ids and pieces",
		Long: `Renders the messages with the chat_template of DIR's tokenizer_config.json, exactly as
t1 chat render does (same flags), then encodes the text with DIR's tokenizer.json as transformers'
apply_chat_template(tokenize=True) does: the template's special tokens become their ids, nothing
is added. Prints the tokens as encode does; --json adds the text: {"text", "ids", "pieces"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--tokenizer is required: a Hugging Face model directory with tokenizer.json and tokenizer_config.json")
			}
			tok, err := loadTokenizer(dir)
			if err != nil {
				return err
			}
			r.cfgPath = dir
			if st, err := os.Stat(dir); err == nil && !st.IsDir() {
				r.cfgPath = filepath.Dir(dir)
			}
			text, err := r.render(cmd)
			if err != nil {
				return err
			}
			return printTokens(cmd, g, tok, text, text)
		},
	}
	cmd.Flags().StringVar(&dir, "tokenizer", "", "model directory with tokenizer.json and tokenizer_config.json")
	r.bind(cmd)
	return cmd
}

// printTokens encodes text and prints one line per token, or JSON with the
// ids and pieces (and shown, when not empty, as "text").
func printTokens(cmd *cobra.Command, g *globals, tok tokenizer.Tokenizer, shown, text string) error {
	ids := tok.Encode(text)
	pieces := make([]string, len(ids))
	for i, id := range ids {
		b, err := tok.TokenBytes(id)
		if err != nil {
			return err
		}
		pieces[i] = string(b)
	}
	if g.json {
		return printJSON(cmd, struct {
			Text   string   `json:"text,omitempty"`
			IDs    []int    `json:"ids"`
			Pieces []string `json:"pieces"`
		}{shown, ids, pieces})
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "#\tID\tPIECE")
	for i, id := range ids {
		fmt.Fprintf(w, "%d\t%d\t%s\n", i, id, strconv.Quote(pieces[i]))
	}
	return w.Flush()
}

func argsOrStdin(cmd *cobra.Command, args []string) (string, error) {
	if len(args) > 0 {
		return strings.Join(args, " "), nil
	}
	b, err := io.ReadAll(cmd.InOrStdin())
	return string(b), err
}

// loadTokenizer reads t1's own tokenizer.json (a checkpoint's) or a Hugging
// Face one (moe.LoadTokenizer); empty is t1's default.
func loadTokenizer(path string) (tokenizer.Tokenizer, error) {
	if path == "" {
		return moe.DefaultTokenizer()
	}
	return moe.LoadTokenizer(path)
}
