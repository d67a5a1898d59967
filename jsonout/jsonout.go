package jsonout

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
)

// Marshal is v as compact JSON, unescaped, with wide integers quoted.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return QuoteWide(bytes.TrimRight(b.Bytes(), "\n")), nil
}

// Write writes v to w as Marshal does, indented by two spaces, and a
// newline.
func Write(w io.Writer, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// Line writes v to w as Marshal does, on one line: a record of NDJSON.
func Line(w io.Writer, v any) error {
	b, err := Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Error is what a command prints for its error under --json.
type Error struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// maxExact is the largest integer a float64, JavaScript's only number,
// holds exactly with its neighbours.
const maxExact = 1 << 53

// QuoteWide rewrites the integer literals of the JSON text b that exceed
// 2^53 in magnitude as strings; the rest of b is kept byte for byte, key
// order included.
func QuoteWide(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			integer := true
			for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
				integer = integer && b[j] >= '0' && b[j] <= '9'
				j++
			}
			if integer && wide(b[i:j]) {
				out = append(append(append(out, '"'), b[i:j]...), '"')
			} else {
				out = append(out, b[i:j]...)
			}
			i = j - 1
			continue
		}
		out = append(out, c)
	}
	return out
}

func wide(lit []byte) bool {
	n, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		return true // beyond int64 either way
	}
	return n > maxExact || n < -maxExact
}
