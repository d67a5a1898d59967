package verifier

import (
	"path"
	"slices"
	"strings"

	"github.com/t1pipe/t1/harbor"
)

// NetworkUse is one command in test.sh that reaches the network at verify
// time.
type NetworkUse struct {
	Line int    `json:"line"` // 1-based, the first line of a continued command
	Tool string `json:"tool"` // "curl", "uv", "pip", "apt", …
	Text string `json:"text"` // the command, bounded
}

// networkTools maps a command word to the sub-commands that fetch (nil: any
// use fetches).
var networkTools = map[string][]string{
	"curl": nil, "wget": nil, "uvx": nil,
	"uv":      {"pip", "run", "tool", "sync", "add", "venv", "python"},
	"pip":     {"install", "download"},
	"pip3":    {"install", "download"},
	"apt-get": {"update", "install", "download", "source"},
	"apt":     {"update", "install"},
	"npm":     {"install", "i", "ci"},
	"npx":     nil,
	"yarn":    {"add", "install"},
	"conda":   {"install", "create"},
	"mamba":   {"install", "create"},
	"git":     {"clone", "fetch", "pull"},
	"go":      {"install", "get"},
	"cargo":   {"install"},
	"gem":     {"install"},
}

// commandWords returns the indexes of words in command position: first in
// the line or after an operator or a keyword, past variable assignments
// and wrappers (sudo, env, exec …); "python3 -m pip" puts pip there too.
func commandWords(words []string) []int {
	var out []int
	atCmd := true
	for i := 0; i < len(words); i++ {
		w := words[i]
		if isOperator(w) || w == "&&" || w == "||" {
			atCmd = true
			continue
		}
		if !atCmd {
			continue
		}
		switch {
		case slices.Contains([]string{"then", "do", "else", "elif", "if", "while", "until", "!", "sudo", "exec", "time", "env", "nohup", "command", "xargs", "timeout"}, w):
			continue
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "-") && !strings.Contains(w[:strings.Index(w, "=")], "/"):
			continue // FOO=bar
		case strings.HasPrefix(w, "-") || isDuration(w):
			continue // options of a wrapper (timeout 60, env -i)
		}
		out = append(out, i)
		if b := path.Base(w); strings.HasPrefix(b, "python") && i+2 < len(words) && words[i+1] == "-m" {
			out = append(out, i+2)
		}
		atCmd = false
	}
	return out
}

func isDuration(w string) bool {
	return w != "" && strings.Trim(w, "0123456789.smhd") == ""
}

// toolFamily folds command words into the families callers care about.
var toolFamily = map[string]string{"uvx": "uv", "pip3": "pip", "apt-get": "apt"}

// NetworkInstalls scans a shell script for commands that fetch software
// or data: curl/wget, uv/uvx, pip, apt, npm, conda, git clone and the like.
// It reads words, not a full shell grammar, so it errs towards reporting a
// command (a fetch named inside a string counts); comments are ignored.
func NetworkInstalls(script []byte) []NetworkUse {
	var out []NetworkUse
	for _, cmd := range logicalLines(string(script)) {
		words := shellWords(cmd.text)
		for i, w := range commandWords(words) {
			base := path.Base(words[w])
			subs, ok := networkTools[base]
			if !ok {
				continue
			}
			i = w
			// "python3 -m pip install" reaches here through "pip".
			if subs != nil {
				if i+1 >= len(words) || !slices.Contains(subs, words[i+1]) {
					continue
				}
			}
			tool := base
			if f, ok := toolFamily[base]; ok {
				tool = f
			}
			out = append(out, NetworkUse{Line: cmd.line, Tool: tool, Text: bound(strings.TrimSpace(cmd.text), 200)})
			break
		}
	}
	return out
}

type logicalLine struct {
	line int
	text string
}

// logicalLines joins backslash continuations and drops comments.
func logicalLines(s string) []logicalLine {
	var out []logicalLine
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(s, "\n") {
		line := stripComment(strings.TrimRight(raw, "\r"))
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		if t := strings.TrimSpace(cur.String()); t != "" {
			out = append(out, logicalLine{line: start, text: t})
		}
		cur.Reset()
	}
	if t := strings.TrimSpace(cur.String()); t != "" {
		out = append(out, logicalLine{line: start, text: t})
	}
	return out
}

// stripComment removes a "#" comment that starts a word outside quotes.
func stripComment(line string) string {
	var q byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			} else if c == '\\' && q == '"' {
				i++
			}
		case c == '\'' || c == '"':
			q = c
		case c == '\\':
			i++
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t' || line[i-1] == ';'):
			return line[:i]
		}
	}
	return line
}

// shellWords splits on blanks and shell operators, removing quotes.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, w.String())
			w.Reset()
			inWord = false
		}
	}
	var q byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			} else {
				w.WriteByte(c)
			}
		case c == '\'' || c == '"':
			q, inWord = c, true
		case c == ' ' || c == '\t':
			flush()
		case strings.IndexByte(";&|()<>`", c) >= 0:
			flush()
			words = append(words, string(c))
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			flush()
			words = append(words, "$(")
			i++
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words
}

// NeedsOffline reports whether the task's test.sh fetches from the network
// at verify time, and what it fetches; such a task cannot verify in an
// offline sandbox as written.
func NeedsOffline(t *harbor.Task) (bool, []NetworkUse) {
	uses := NetworkInstalls(t.Files[harbor.TestScriptPath].Data)
	return len(uses) > 0, uses
}

func isOperator(w string) bool {
	return w == ";" || w == "&" || w == "|" || w == "(" || w == ")" || w == ">" || w == "<" || w == "`" || w == "$("
}
