package sandbox

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Instruction is one Dockerfile instruction after line continuations and
// comments are removed.
type Instruction struct {
	// Cmd is the instruction keyword in upper case (FROM, RUN, …).
	Cmd string
	// Flags are the leading --name=value options (COPY --chown=…).
	Flags []string
	// Args are the arguments: the JSON array's elements for the exec form,
	// else the whitespace-separated words (quotes kept, for ENV and LABEL
	// to interpret).
	Args []string
	// Raw is the argument text as written (continuations joined).
	Raw string
	// JSON says the arguments were a JSON array (exec form).
	JSON bool
	// Line is the 1-based line the instruction starts on.
	Line int
}

// DockerfileError is a Dockerfile problem at a line.
type DockerfileError struct {
	File string
	Line int
	Msg  string
}

func (e *DockerfileError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// knownInstructions are every Dockerfile keyword; the sandbox supports some
// and rejects the rest by name.
var knownInstructions = map[string]bool{
	"FROM": true, "RUN": true, "CMD": true, "LABEL": true, "MAINTAINER": true, "EXPOSE": true,
	"ENV": true, "ADD": true, "COPY": true, "ENTRYPOINT": true, "VOLUME": true, "USER": true,
	"WORKDIR": true, "ARG": true, "ONBUILD": true, "STOPSIGNAL": true, "HEALTHCHECK": true, "SHELL": true,
}

// ParseDockerfile splits a Dockerfile into instructions: line
// continuations (a trailing backslash) are joined, comment lines and empty
// lines dropped. name is used in errors. It checks syntax only; what the
// sandbox can execute is decided when the instructions run.
func ParseDockerfile(name string, data []byte) ([]Instruction, error) {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	var out []Instruction
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trim := strings.TrimSpace(line)
		if trim == "" || strings.HasPrefix(trim, "#") {
			if i == 0 || len(out) == 0 {
				if d, ok := strings.CutPrefix(trim, "#"); ok {
					k, v, isDir := strings.Cut(strings.TrimSpace(d), "=")
					if isDir && strings.EqualFold(strings.TrimSpace(k), "escape") && strings.TrimSpace(v) != `\` {
						return nil, &DockerfileError{name, i + 1, fmt.Sprintf("escape directive %q: only the default escape character \\ is supported", strings.TrimSpace(v))}
					}
				}
			}
			continue
		}
		start := i + 1
		var b strings.Builder
		for {
			cont := strings.HasSuffix(strings.TrimRight(line, " \t"), `\`)
			if cont {
				line = strings.TrimRight(line, " \t")
				b.WriteString(line[:len(line)-1])
			} else {
				b.WriteString(line)
			}
			if !cont {
				break
			}
			// Comment and empty lines inside a continuation are skipped.
			for i+1 < len(lines) {
				t := strings.TrimSpace(lines[i+1])
				if t == "" || strings.HasPrefix(t, "#") {
					i++
					continue
				}
				break
			}
			if i+1 >= len(lines) {
				break
			}
			i++
			line = lines[i]
		}
		text := strings.TrimSpace(b.String())
		var kw, rest string
		if j := strings.IndexAny(text, " \t"); j >= 0 {
			kw, rest = text[:j], text[j+1:]
		} else {
			kw, rest = text, ""
		}
		cmd := strings.ToUpper(kw)
		if !knownInstructions[cmd] {
			return nil, &DockerfileError{name, start, fmt.Sprintf("unknown instruction %q", kw)}
		}
		rest = strings.TrimSpace(rest)
		in := Instruction{Cmd: cmd, Line: start}
		// Options come first: --chown=…, --from=…, --platform=…
		for strings.HasPrefix(rest, "--") {
			j := strings.IndexAny(rest, " \t")
			if j < 0 {
				in.Flags = append(in.Flags, rest)
				rest = ""
				break
			}
			in.Flags = append(in.Flags, rest[:j])
			rest = strings.TrimSpace(rest[j+1:])
		}
		in.Raw = rest
		if strings.Contains(rest, "<<") && (cmd == "RUN" || cmd == "COPY" || cmd == "ADD") && heredoc(rest) {
			return nil, &DockerfileError{name, start, cmd + " with a here-document is not supported"}
		}
		if strings.HasPrefix(rest, "[") {
			var arr []string
			if err := json.Unmarshal([]byte(rest), &arr); err == nil {
				in.Args, in.JSON = arr, true
			}
		}
		if !in.JSON {
			words, err := splitWords(rest)
			if err != nil {
				return nil, &DockerfileError{name, start, fmt.Sprintf("%s: %v", cmd, err)}
			}
			in.Args = words
		}
		out = append(out, in)
	}
	return out, nil
}

// heredoc reports whether s uses "<<WORD" or "<<-WORD" as Docker's
// here-document syntax does (not "<<<" or a shift in arithmetic).
func heredoc(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '<' && s[i+1] == '<' && (i == 0 || s[i-1] == ' ') {
			r := s[i+2:]
			r = strings.TrimPrefix(r, "-")
			r = strings.TrimLeft(r, `"'`)
			if r != "" && (r[0] == '_' || r[0] >= 'A' && r[0] <= 'Z' || r[0] >= 'a' && r[0] <= 'z') {
				return true
			}
		}
	}
	return false
}

// splitWords splits s at unquoted whitespace, keeping quotes and
// backslashes in the words.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			cur.WriteByte(c)
			if c == '\\' && quote == '"' && i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			} else if c == quote {
				quote = 0
			}
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(c)
			i++
			cur.WriteByte(s[i])
			in = true
		case c == '"' || c == '\'':
			quote = c
			cur.WriteByte(c)
			in = true
		case c == ' ' || c == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// unquote removes one level of shell-style quoting from a word, expanding
// $VAR, ${VAR}, ${VAR:-default} and ${VAR:+alternative} from env outside
// single quotes, as Docker does for ENV, WORKDIR, COPY and ARG.
func unquote(w string, env map[string]string) (string, error) {
	var b strings.Builder
	var quote byte
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '\\' && i+1 < len(w):
			i++
			b.WriteByte(w[i])
		case c == '"':
			if quote == '"' {
				quote = 0
			} else {
				quote = '"'
			}
		case c == '\'' && quote == 0:
			quote = '\''
		case c == '$' && i+1 < len(w):
			n, v, err := expandVar(w[i+1:], env)
			if err != nil {
				return "", err
			}
			if n == 0 {
				b.WriteByte(c)
				continue
			}
			b.WriteString(v)
			i += n
		default:
			b.WriteByte(c)
		}
	}
	if quote != 0 {
		return "", fmt.Errorf("unterminated %c quote in %q", quote, w)
	}
	return b.String(), nil
}

// expandVar reads a variable reference after '$' and returns how many
// bytes it took and its value.
func expandVar(s string, env map[string]string) (int, string, error) {
	isName := func(c byte, first bool) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	if s[0] == '{' {
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return 0, "", fmt.Errorf("unterminated ${ in %q", s)
		}
		body := s[1:end]
		name, word, op := body, "", ""
		if j := strings.Index(body, ":"); j >= 0 {
			name, op = body[:j], body[j:]
			if len(op) < 2 || (op[1] != '-' && op[1] != '+') {
				return 0, "", fmt.Errorf("unsupported substitution ${%s}", body)
			}
			word = op[2:]
			op = op[:2]
		}
		for k := 0; k < len(name); k++ {
			if !isName(name[k], k == 0) {
				return 0, "", fmt.Errorf("bad variable name in ${%s}", body)
			}
		}
		if name == "" {
			return 0, "", fmt.Errorf("empty variable name in ${%s}", body)
		}
		v, ok := env[name]
		switch op {
		case ":-":
			if !ok || v == "" {
				v = word
			}
		case ":+":
			if ok && v != "" {
				v = word
			} else {
				v = ""
			}
		}
		return end + 1, v, nil
	}
	n := 0
	for n < len(s) && isName(s[n], n == 0) {
		n++
	}
	if n == 0 {
		return 0, "", nil
	}
	return n, env[s[:n]], nil
}
