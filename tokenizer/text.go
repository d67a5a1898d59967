package tokenizer

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// Help texts of `t1 tokenizer` and its commands.
const (
	Help = `--tokenizer names a directory holding tokenizer.json (a Hugging Face model directory, or a
t1 checkpoint) or the file itself; without it, t1's default tokenizer is used. A Hugging Face
file must be a byte-level BPE (GPT-2, Qwen2/Qwen3, Llama 3 and kin); any feature t1 does not
implement exactly is refused with an error naming it.`
	EncodeHelp = `Prints one line per token: its index, id, and the bytes it stands for (quoted). Special and
added tokens written in the text become their one id. Nothing is added around the text (no
BOS or EOS). With --json: {"ids": [...], "pieces": [...]}, pieces as strings (bytes that are
not UTF-8 on their own, as in part of a character, show as U+FFFD there; decode them by id).`
	DecodeHelp = `Writes exactly the bytes of the ids, with no newline added: a sequence cut inside a character
writes the bytes it holds. With --json: {"text": "...", "utf8": true|false}.`
	RenderHelp = `Renders the messages with the chat_template of DIR's tokenizer_config.json, exactly as
t1 chat render does (same flags), then encodes the text with DIR's tokenizer.json as transformers'
apply_chat_template(tokenize=True) does: the template's special tokens become their ids, nothing
is added. Prints the tokens as encode does; --json adds the text: {"text", "ids", "pieces"}.`
)

// ParseIDs reads token ids separated by spaces, commas or newlines, in
// brackets or not, as a JSON array or a plain list writes them.
func ParseIDs(s string) ([]int, error) {
	var ids []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' || r == '[' || r == ']'
	}) {
		id, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("decode: %q is not a token id", f)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Pieces are the bytes each id stands for, as strings.
func Pieces(tok Tokenizer, ids []int) ([]string, error) {
	pieces := make([]string, len(ids))
	for i, id := range ids {
		b, err := tok.TokenBytes(id)
		if err != nil {
			return nil, err
		}
		pieces[i] = string(b)
	}
	return pieces, nil
}

// WriteTokens prints one line per token: index, id and quoted piece.
func WriteTokens(w io.Writer, ids []int, pieces []string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tID\tPIECE")
	for i, id := range ids {
		fmt.Fprintf(tw, "%d\t%d\t%s\n", i, id, strconv.Quote(pieces[i]))
	}
	return tw.Flush()
}

// Tokens is a text's tokens as `t1 tokenizer encode` prints them.
type Tokens struct {
	// Text is the text encoded, when it is shown (render shows it).
	Text   string   `json:"text,omitempty"`
	IDs    []int    `json:"ids"`
	Pieces []string `json:"pieces"`
}

// Tokenize encodes text; shown is kept as Tokens.Text.
func Tokenize(tok Tokenizer, shown, text string) (*Tokens, error) {
	ids := tok.Encode(text)
	pieces, err := Pieces(tok, ids)
	if err != nil {
		return nil, err
	}
	return &Tokens{shown, ids, pieces}, nil
}

// WriteText prints one line per token.
func (t *Tokens) WriteText(w io.Writer) error { return WriteTokens(w, t.IDs, t.Pieces) }

// Decoded is what ids stand for, as `t1 tokenizer decode` prints it.
type Decoded struct {
	Text string `json:"text"`
	// UTF8 says whether Text is valid UTF-8; a sequence cut inside a
	// character is not.
	UTF8 bool `json:"utf8"`
}

// Decode is tok's decoding of ids.
func Decode(tok Tokenizer, ids []int) (*Decoded, error) {
	text, err := tok.Decode(ids)
	if err != nil {
		return nil, err
	}
	return &Decoded{text, utf8.ValidString(text)}, nil
}

// WriteText writes exactly the bytes, with no newline added.
func (d *Decoded) WriteText(w io.Writer) error {
	_, err := io.WriteString(w, d.Text)
	return err
}
