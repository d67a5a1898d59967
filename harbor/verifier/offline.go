package verifier

import (
	"errors"
	"fmt"
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

// PytestOptions says where things are when the verifier runs. Zero values
// take the container layout Harbor uses.
type PytestOptions struct {
	Python   string // default /usr/bin/python3 (Debian python3-pytest)
	TestsDir string // where tests/ is mounted; default /tests
	LogsDir  string // default /logs/verifier
	// WorkDir defaults to TestsDir, which holds only the task's own files:
	// never the image's WORKDIR, where the agent worked.
	WorkDir string
	Home    string // default Home
}

type PytestPlan struct {
	Argv       []string `json:"argv"`
	Dir        string   `json:"dir"`
	Env        []string `json:"env"`         // KEY=VALUE, to add to the environment (Env)
	Script     string   `json:"script"`      // the same as one sh script, for a sandbox
	ReportPath string   `json:"report_path"` // the JUnit XML it writes
	Targets    []string `json:"targets"`     // test files (or node ids) it runs
	// Missing lists packages test.sh installed besides pytest and its CTRF
	// plugin; the local interpreter may lack them.
	Missing []string `json:"missing,omitempty"`
	// Network is what made the task need this plan.
	Network []NetworkUse `json:"network,omitempty"`
}

// NeedsOffline reports whether the task's test.sh fetches from the network
// at verify time, and what it fetches; such a task cannot verify in an
// offline sandbox as written.
func NeedsOffline(t *harbor.Task) (bool, []NetworkUse) {
	uses := NetworkInstalls(t.Files[harbor.TestScriptPath].Data)
	return len(uses) > 0, uses
}

// OfflinePytest builds the command that runs the task's pytest files with
// the local pytest instead of test.sh (pytest 7.2 from Debian: no CTRF
// plugin, so it writes JUnit XML):
//
//	cd TESTS && env … python3 -I -B -m pytest --rootdir=TESTS --confcutdir=TESTS \
//	    -p no:cacheprovider --junitxml=LOGS/junit.xml -rA TESTS/test_outputs.py
//
// Isolated mode (-I) keeps the user site-packages, PYTHON* variables and
// the working directory off the interpreter's path, and --confcutdir stops
// conftest.py discovery at the tests directory; Env gives the
// environment. The targets are the test paths test.sh hands pytest (with
// /tests/ rewritten to TestsDir), else every test_*.py / *_test.py under
// tests/. It fails when the task has no pytest files.
func OfflinePytest(t *harbor.Task, opt PytestOptions) (*PytestPlan, error) {
	if opt.Python == "" {
		opt.Python = "/usr/bin/python3"
	}
	if opt.TestsDir == "" {
		opt.TestsDir = "/tests"
	}
	opt.TestsDir = strings.TrimSuffix(opt.TestsDir, "/")
	if opt.LogsDir == "" {
		opt.LogsDir = "/logs/verifier"
	}
	if opt.WorkDir == "" {
		opt.WorkDir = opt.TestsDir
	}
	if opt.Home == "" {
		opt.Home = Home
	}
	files := t.PytestFiles()
	if len(files) == 0 {
		return nil, errors.New("offline verifier: the task has no pytest files (tests/test_*.py or tests/*_test.py)")
	}
	script := t.Files[harbor.TestScriptPath].Data
	targets, missing := pytestTargets(script)
	mapped := make([]string, 0, len(targets))
	for _, tg := range targets {
		if rest, ok := strings.CutPrefix(tg, "/tests/"); ok {
			tg = opt.TestsDir + "/" + rest
		} else if file, _, _ := strings.Cut(tg, "::"); !strings.HasPrefix(tg, "/") {
			// A path relative to where test.sh ran (usually `cd /tests`)
			// that names one of the task's test files.
			if _, ok := t.Files[harbor.TestsDir+"/"+strings.TrimPrefix(file, "./")]; ok {
				tg = opt.TestsDir + "/" + strings.TrimPrefix(tg, "./")
			}
		}
		mapped = append(mapped, tg)
	}
	if len(mapped) == 0 {
		for _, f := range files {
			mapped = append(mapped, opt.TestsDir+"/"+strings.TrimPrefix(f, harbor.TestsDir+"/"))
		}
	}
	report := strings.TrimSuffix(opt.LogsDir, "/") + "/" + JUnitFile
	argv := append([]string{opt.Python, "-I", "-B", "-m", "pytest", "--rootdir=" + opt.TestsDir, "--confcutdir=" + opt.TestsDir,
		"-p", "no:cacheprovider", "--junitxml=" + report, "-rA"}, mapped...)
	env := Env(t, opt.Home)
	var sb strings.Builder
	fmt.Fprintf(&sb, "mkdir -p %s && cd %s && exec /usr/bin/env", shellQuote(opt.LogsDir), shellQuote(opt.WorkDir))
	for _, e := range env {
		sb.WriteString(" " + shellQuote(e))
	}
	for _, a := range argv {
		sb.WriteString(" " + shellQuote(a))
	}
	_, uses := NeedsOffline(t)
	return &PytestPlan{Argv: argv, Dir: opt.WorkDir, Env: env, Script: sb.String(), ReportPath: report, Targets: mapped, Missing: missing, Network: uses}, nil
}

// pytestTargets finds the pytest command in test.sh and returns its test
// paths, plus the packages the script installs for it (besides pytest and
// pytest-json-ctrf).
func pytestTargets(script []byte) (targets, missing []string) {
	seen := map[string]bool{}
	addPkg := func(spec string) {
		name := spec
		if i := strings.IndexAny(name, "=<>!~[;@ "); i >= 0 {
			name = name[:i]
		}
		name = strings.ToLower(name)
		if name == "" || strings.HasPrefix(name, "-") || name == "pytest" || name == "pytest-json-ctrf" || seen[name] {
			return
		}
		seen[name] = true
		missing = append(missing, name)
	}
	for _, cmd := range logicalLines(string(script)) {
		words := shellWords(cmd.text)
		for i := 0; i < len(words); i++ {
			w := words[i]
			switch {
			case (w == "--with" || w == "-w") && i+1 < len(words):
				addPkg(words[i+1])
				i++
			case strings.HasPrefix(w, "--with="):
				addPkg(strings.TrimPrefix(w, "--with="))
			case (path.Base(w) == "pip" || path.Base(w) == "pip3") && i+1 < len(words) && words[i+1] == "install":
				for j := i + 2; j < len(words) && !isOperator(words[j]); j++ {
					switch words[j] {
					case "-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root", "-e", "--editable":
						j++ // an option's value, not a package
						continue
					}
					addPkg(words[j])
				}
			case w == "pytest" && len(targets) == 0:
				for j := i + 1; j < len(words) && !isOperator(words[j]); j++ {
					a := words[j]
					if opt := pytestValueOption(a); opt {
						j++
						continue
					}
					if strings.HasPrefix(a, "-") {
						continue
					}
					if strings.HasSuffix(a, ".py") || strings.Contains(a, ".py::") || strings.HasPrefix(a, "/tests") {
						targets = append(targets, a)
					}
				}
			}
		}
	}
	return targets, missing
}

// pytestValueOption reports options whose value is the next word.
func pytestValueOption(a string) bool {
	switch a {
	case "--ctrf", "--junitxml", "-p", "-k", "-m", "-o", "-c", "--rootdir", "--json-report-file", "--timeout", "--tb", "-n", "--basetemp":
		return true
	}
	return false
}

func isOperator(w string) bool {
	return w == ";" || w == "&" || w == "|" || w == "(" || w == ")" || w == ">" || w == "<" || w == "`" || w == "$("
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
