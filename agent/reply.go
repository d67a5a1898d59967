package agent

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The reply format the agent is told to use. Anything outside the tags is
// the agent's own reasoning and is ignored.
//
//	<command>shell text</command>               run in the persistent shell
//	<command timeout="120">long job</command>   with its own timeout, in seconds
//	<task_complete/>                            the task is done (after the commands)
//
// Commands run in order; the observation reports each one's output and
// exit status. A reply with neither a command nor <task_complete/> earns a
// corrective observation, never an error of the episode.
const ReplyFormat = `Reply with shell commands inside <command>...</command> tags; they run in order in one persistent bash shell, and you will see their output. Add timeout="SECONDS" to a command tag for long jobs. When the task is done, reply with <task_complete/>.`

// Command is one command of a reply.
type Command struct {
	Script  string
	Timeout time.Duration // 0: the episode's default
}

// Reply is a parsed policy reply.
type Reply struct {
	Commands []Command
	Complete bool
}

// MaxCommandsPerReply bounds what one reply may ask to run.
const MaxCommandsPerReply = 32

// ParseReply reads the reply format. Its errors are meant for the agent:
// they become the corrective observation.
func ParseReply(text string) (Reply, error) {
	var r Reply
	rest := text
	for {
		open := strings.Index(rest, "<command")
		done := strings.Index(rest, "<task_complete/>")
		if done >= 0 && (open < 0 || done < open) {
			r.Complete = true
			rest = rest[done+len("<task_complete/>"):]
			continue
		}
		if open < 0 {
			break
		}
		rest = rest[open+len("<command"):]
		gt := strings.IndexByte(rest, '>')
		if gt < 0 {
			return r, errors.New("a <command> tag is not closed with '>'")
		}
		attrs := rest[:gt]
		rest = rest[gt+1:]
		end := strings.Index(rest, "</command>")
		if end < 0 {
			return r, errors.New("a <command> has no closing </command>")
		}
		c := Command{Script: strings.TrimSpace(rest[:end])}
		rest = rest[end+len("</command>"):]
		if a := strings.TrimSpace(attrs); a != "" {
			v, ok := strings.CutPrefix(a, "timeout=")
			secs, err := strconv.ParseFloat(strings.Trim(v, `"'`), 64)
			if !ok || err != nil || secs <= 0 || secs > 86400 {
				return r, fmt.Errorf("unsupported command attribute %q (only timeout=\"SECONDS\")", a)
			}
			c.Timeout = time.Duration(secs * float64(time.Second))
		}
		if c.Script == "" {
			return r, errors.New("a <command> is empty")
		}
		if len(r.Commands) == MaxCommandsPerReply {
			return r, fmt.Errorf("more than %d commands in one reply", MaxCommandsPerReply)
		}
		r.Commands = append(r.Commands, c)
	}
	if len(r.Commands) == 0 && !r.Complete {
		return r, errors.New("the reply has no <command>...</command> and no <task_complete/>")
	}
	return r, nil
}
