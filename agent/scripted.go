package agent

import (
	"context"
	"regexp"
	"strings"
	"sync"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/moe"
)

// Scripted is a policy that replays fixed replies, one per turn, then
// declares the task complete. It turns a reference solution into a
// demonstration (SFT data) through the same harness the model goes
// through, and it drives the harness deterministically in tests. Its
// log-probs are 0 and it routes nothing.
//
// One Scripted serves one episode: it counts the turns it has answered.
type Scripted struct {
	tp      *moe.Chat
	replies []string
	mu      sync.Mutex
	turn    int
}

// NewScripted replays replies in order.
func NewScripted(tp *moe.Chat, replies []string) *Scripted {
	return &Scripted{tp: tp, replies: replies}
}

// FromSolution makes one reply per non-empty, non-comment line of a
// solution script (a line ending in a backslash continues), then a final
// <task_complete/>. Heredocs are sent whole with the line that opens them.
// Lines that only set the script's error options (set -euo pipefail) are
// left out, and so is a cd to /app before any other command: the episode's
// shell is interactive and persistent, where errexit would end the shell
// at the first failing command, and it starts in /app.
func FromSolution(tp *moe.Chat, script string) *Scripted {
	var replies []string
	var cur strings.Builder
	heredoc := ""
	for _, line := range strings.Split(script, "\n") {
		trimmed := strings.TrimSpace(line)
		if heredoc == "" && cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#") || shellOptions.MatchString(trimmed) ||
			(len(replies) == 0 && trimmed == "cd /app")) {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		switch {
		case heredoc != "":
			if trimmed == heredoc {
				heredoc = ""
			}
		case strings.Contains(line, "<<"):
			_, after, _ := strings.Cut(line, "<<")
			heredoc = strings.Trim(strings.TrimSpace(strings.TrimPrefix(after, "-")), `'"`)
			if f := strings.Fields(heredoc); len(f) > 0 {
				heredoc = f[0]
			}
		case strings.HasSuffix(trimmed, "\\"):
		}
		if heredoc == "" && !strings.HasSuffix(trimmed, "\\") {
			replies = append(replies, "<command>"+strings.TrimRight(cur.String(), "\n")+"</command>")
			cur.Reset()
		}
	}
	return NewScripted(tp, append(replies, "<task_complete/>"))
}

// shellOptions matches a line that only sets shell options.
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
	ids := append(s.tp.Content(reply), s.tp.End())
	return &inference.GenerateResponse{
		OutputIDs: ids, OutputTokenLogprobs: make([]float32, len(ids)),
		RoutingUnavailable: "scripted policy", FinishReason: inference.FinishStop,
		PromptTokens: len(req.InputIDs), CompletionTokens: len(ids),
	}, nil
}
