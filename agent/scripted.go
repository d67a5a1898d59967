package agent

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/t1pipe/t1/infra/inference"
	"mvdan.cc/sh/v3/syntax"
)

// Scripted is a policy that replays fixed replies, one per turn, then
// declares the task complete. It turns a reference solution into a
// demonstration (SFT data) through the same harness the model goes
// through, and it drives the harness deterministically in tests. Its
// log-probs are 0 and it routes nothing.
//
// One Scripted serves one episode: it counts the turns it has answered.
type Scripted struct {
	chat    Chat
	replies []string
	mu      sync.Mutex
	turn    int
}

// NewScripted replays replies in order.
func NewScripted(chat Chat, replies []string) *Scripted {
	return &Scripted{chat: chat, replies: replies}
}

// FromSolution makes one reply per top-level statement of a solution
// script, parsed as bash, then the completion, in the episode's action
// format (Format.Demo). A reply carries the
// statement's own source text, so quoting, comments inside compound
// commands and here-document bodies reach the shell byte for byte; a
// function definition is a turn of its own, which the persistent shell
// keeps for the statements after it. Statements that share a line with a
// here-document's opener are one reply, because the body follows the
// whole line. Comments between statements are not sent. Statements that
// only set shell options (set -euo pipefail) are left out, and so is a cd
// to /app before any other command: the episode's shell is interactive and
// persistent, where errexit would end the shell at the first failing
// command, and it starts in /app.
//
// A script that is not valid bash is an error, never a partial split.
func FromSolution(chat Chat, format Format, script string) (*Scripted, error) {
	cmds, err := solutionCommands(script)
	if err != nil {
		return nil, err
	}
	return NewScripted(chat, format.Demo(cmds)), nil
}

// solutionCommands splits a solution script into the commands
// FromSolution sends, one per turn.
func solutionCommands(script string) ([]string, error) {
	// Bash takes bytes that are not UTF-8 as they come; the parser does
	// not, so it reads a copy with each such byte replaced by one ASCII
	// byte, which keeps every offset, and the commands are cut from the
	// script itself.
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true)).
		Parse(strings.NewReader(asciiInvalid(script)), "solve.sh")
	if err != nil {
		return nil, fmt.Errorf("agent: the solution script is not valid bash (%w): fix solve.sh", err)
	}
	comment := make([]bool, len(script))
	syntax.Walk(f, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.Comment); ok {
			for i := c.Pos().Offset(); i < c.End().Offset() && int(i) < len(script); i++ {
				comment[i] = true
			}
		}
		return true
	})
	var cmds []string
	for i := 0; i < len(f.Stmts); {
		first := f.Stmts[i]
		// A here-document's body starts on the line after its opener's
		// line, past any statement that follows on that line.
		for i+1 < len(f.Stmts) && heredocLine(f.Stmts[i]) == f.Stmts[i+1].Pos().Line() {
			i++
		}
		last := f.Stmts[i]
		i++
		limit := uint(len(script))
		if i < len(f.Stmts) {
			limit = f.Stmts[i].Pos().Offset()
		}
		end := last.End().Offset()
		if last.Semicolon.IsValid() && !last.Background && !last.Coprocess && !last.Disown {
			end = last.Semicolon.Offset() // a separator, not part of the command
		}
		// Here-document bodies (and their closing lines) lie after the
		// statement's end: take the gap up to its last byte that is neither
		// blank nor a comment.
		for j := last.End().Offset(); j < limit; j++ {
			if b := script[j]; !comment[j] && b != ' ' && b != '\t' && b != '\n' && b != '\r' && !(b == '\\' && j+1 < limit && script[j+1] == '\n') {
				end = j + 1
			}
		}
		text := strings.TrimSpace(script[first.Pos().Offset():end])
		if shellOptions.MatchString(text) || (len(cmds) == 0 && text == "cd /app") {
			continue
		}
		if strings.Contains(text, "</command>") {
			return nil, fmt.Errorf("agent: the solution command at line %d spells </command>, which would end its reply early: write it differently in solve.sh", first.Pos().Line())
		}
		cmds = append(cmds, text)
	}
	return cmds, nil
}

// heredocLine is the line of a statement's last here-document opener, 0
// when it has none.
func heredocLine(s *syntax.Stmt) uint {
	var line uint
	syntax.Walk(s, func(n syntax.Node) bool {
		if r, ok := n.(*syntax.Redirect); ok && (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) {
			line = max(line, r.Word.End().Line())
		}
		return true
	})
	return line
}

// shellOptions matches a statement that only sets shell options.
var shellOptions = regexp.MustCompile(`^set( +[-+][euxo]+( +pipefail)?)+$`)

// Generate returns the next reply.
func (s *Scripted) Generate(_ context.Context, req inference.GenerateRequest) (*inference.GenerateResponse, error) {
	s.mu.Lock()
	turn := s.turn
	s.turn++
	s.mu.Unlock()
	reply := "<task_complete/>"
	if turn < len(s.replies) {
		reply = s.replies[turn]
	}
	ids := s.chat.reply(reply)
	return &inference.GenerateResponse{
		OutputIDs: ids, OutputTokenLogprobs: make([]float32, len(ids)),
		RoutingUnavailable: "scripted policy", FinishReason: inference.FinishStop,
		PromptTokens: len(req.InputIDs), CompletionTokens: len(ids),
	}, nil
}

// asciiInvalid replaces every byte of s that is not part of valid UTF-8
// with '_', keeping each offset.
func asciiInvalid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := []byte(s)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			b[i] = '_'
		}
		i += n
	}
	return string(b)
}
