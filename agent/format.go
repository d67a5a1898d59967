package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Action formats: how a reply asks for commands (Settings.ActionFormat).
const (
	FormatTags      = "tags"          // <command>…</command>, <task_complete/> (ParseReply)
	FormatTerminus  = "terminus-json" // Terminus-2's JSON: analysis, plan, commands, task_complete
	FormatToolCalls = "tool-calls"    // the model's native tool calls to a bash tool
)

// Formats are the action formats, by name.
var Formats = []string{FormatTags, FormatTerminus, FormatToolCalls}

// Format is how a policy's replies ask for commands and declare the task
// done. A reply Parse refuses earns the Corrective observation, never an
// error of the episode.
type Format interface {
	Name() string
	// Parse reads a reply; its errors are meant for the policy.
	Parse(text string) (Reply, error)
	// Corrective is the observation a refused reply earns.
	Corrective(err error) string
	// Tools are the tool schemas the chat template shows (nil: none).
	Tools() []any
	// Confirm says that a completion counts only when the reply after
	// ConfirmPrompt declares it again (Terminus-2's confirm-twice).
	Confirm() bool
	// ConfirmPrompt is the observation that asks for that confirmation.
	ConfirmPrompt(observation string) string
	// Demo is a demonstration's replies in this format: each command in
	// a turn of its own, then the completion.
	Demo(commands []string) []string
}

// NewFormat is the format of that name.
func NewFormat(name string) (Format, error) {
	switch name {
	case "", FormatTags:
		return tags{}, nil
	case FormatTerminus:
		return terminus{}, nil
	case FormatToolCalls:
		return toolCalls{}, nil
	}
	return nil, fmt.Errorf("agent: action format %q is not one of %s", name, strings.Join(Formats, ", "))
}

// Tags is t1's own format, the default.
func Tags() Format { return tags{} }

type tags struct{}

func (tags) Name() string                     { return FormatTags }
func (tags) Parse(text string) (Reply, error) { return ParseReply(text) }
func (tags) Tools() []any                     { return nil }
func (tags) Confirm() bool                    { return false }
func (tags) ConfirmPrompt(string) string      { return "" }
func (tags) Demo(cmds []string) []string {
	out := make([]string, 0, len(cmds)+1)
	for _, c := range cmds {
		out = append(out, "<command>"+c+"</command>")
	}
	return append(out, "<task_complete/>")
}

func (tags) Corrective(err error) string {
	return fmt.Sprintf("Your reply could not be used: %s. Reply with <command>...</command> or <task_complete/>.\n", err)
}

// withoutThinking is a reply past its reasoning: a model that thinks
// writes <think>…</think> first, and what it considers there is not an
// action.
func withoutThinking(text string) string {
	if _, after, ok := strings.Cut(text, "</think>"); ok {
		return after
	}
	return text
}

// terminus is Terminus-2's JSON reply:
//
//	{"analysis": "…", "plan": "…",
//	 "commands": [{"keystrokes": "ls -la\n", "duration": 0.1}],
//	 "task_complete": false}
//
// The harness's shell runs each command to completion, so keystrokes are
// a command line ending in a newline (the newline is Enter); keys without
// one (C-c, a half-typed line) are refused with a corrective. duration,
// Terminus's wait before reading the screen, is checked and otherwise
// unused: the shell returns when the command ends or times out.
type terminus struct{}

// TerminusSystemPrompt tells a model the JSON format.
const TerminusSystemPrompt = `You are an AI assistant solving a task in a Linux shell. Reply with one JSON object and nothing else:
{"analysis": "what you see in the output so far", "plan": "what you will do next", "commands": [{"keystrokes": "ls -la\n", "duration": 0.1}], "task_complete": false}
Each command's keystrokes are a shell command ending with a newline; they run in order in one persistent bash shell and you will see their output. Set "task_complete": true when the task is done.`

func (terminus) Name() string  { return FormatTerminus }
func (terminus) Tools() []any  { return nil }
func (terminus) Confirm() bool { return true }
func (terminus) ConfirmPrompt(obs string) string {
	return "Current terminal state:\n" + obs + "\nAre you sure the task is complete? Your solution will be graded and you will not be able to change it. If so, reply with \"task_complete\": true again.\n"
}
func (terminus) Corrective(err error) string {
	return fmt.Sprintf("Your previous response had parsing errors:\nERROR: %s\n\nPlease fix them and reply with one JSON object.\n", err)
}

func (terminus) Demo(cmds []string) []string {
	reply := func(cmds []string, done bool) string {
		type command struct {
			Keystrokes string  `json:"keystrokes"`
			Duration   float64 `json:"duration"`
		}
		v := struct {
			Analysis     string    `json:"analysis"`
			Plan         string    `json:"plan"`
			Commands     []command `json:"commands"`
			TaskComplete bool      `json:"task_complete"`
		}{Analysis: "", Plan: "", Commands: []command{}, TaskComplete: done}
		for _, c := range cmds {
			v.Commands = append(v.Commands, command{Keystrokes: c + "\n", Duration: 1})
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	out := make([]string, 0, len(cmds)+2)
	for _, c := range cmds {
		out = append(out, reply([]string{c}, false))
	}
	// Declared, then confirmed.
	return append(out, reply(nil, true), reply(nil, true))
}

func (terminus) Parse(text string) (Reply, error) {
	var r Reply
	text = withoutThinking(text)
	open, end := strings.IndexByte(text, '{'), strings.LastIndexByte(text, '}')
	if open < 0 || end < open {
		return r, errors.New("no JSON object found in the reply")
	}
	var v struct {
		Analysis *string `json:"analysis"`
		Plan     *string `json:"plan"`
		Commands *[]struct {
			Keystrokes *string  `json:"keystrokes"`
			Duration   *float64 `json:"duration"`
		} `json:"commands"`
		TaskComplete *bool `json:"task_complete"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(text[open : end+1])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return r, fmt.Errorf("the JSON object does not parse: %v (fields: analysis, plan, commands, task_complete)", err)
	}
	if v.Analysis == nil || v.Plan == nil {
		return r, errors.New("missing required fields: analysis and plan")
	}
	if v.Commands == nil {
		return r, errors.New("missing required field: commands (an array, [] when there is nothing to run)")
	}
	r.Complete = v.TaskComplete != nil && *v.TaskComplete
	for i, c := range *v.Commands {
		switch {
		case c.Keystrokes == nil:
			return r, fmt.Errorf("command %d has no keystrokes", i)
		case !strings.HasSuffix(*c.Keystrokes, "\n"):
			return r, fmt.Errorf("command %d's keystrokes %q do not end with a newline: each command is a shell command line, run to completion (no interactive keys)", i, *c.Keystrokes)
		case c.Duration != nil && (*c.Duration < 0 || math.IsNaN(*c.Duration)):
			return r, fmt.Errorf("command %d has a negative duration", i)
		}
		script := strings.TrimSpace(*c.Keystrokes)
		if script == "" {
			return r, fmt.Errorf("command %d is empty", i)
		}
		if len(r.Commands) == MaxCommandsPerReply {
			return r, fmt.Errorf("more than %d commands in one reply", MaxCommandsPerReply)
		}
		r.Commands = append(r.Commands, Command{Script: script})
	}
	return r, nil
}

// toolCalls is the model's native tool calling: the chat template shows
// one tool, bash, and the model calls it as its template's tool calls
// read, <tool_call>{"name": "bash", "arguments": {"command": "…"}}</tool_call>
// (Qwen2.5, Qwen3, Hermes). A reply without a tool call is the model's
// final answer: the task is done. The sampled text stays the assistant's
// message as it was written, so re-rendering never re-serialises a call.
type toolCalls struct{}

// BashTool is the bash tool's schema, in the order the template shows it.
var BashTool = json.RawMessage(`{"type": "function", "function": {"name": "bash", "description": "Run a command in a persistent bash shell and return its output and exit status. The shell keeps its directory, variables and jobs between calls.", "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The bash command to run."}, "timeout": {"type": "integer", "description": "Seconds before the command is interrupted (optional)."}}, "required": ["command"]}}}`)

// ToolCallsSystemPrompt tells a model that it works through the bash tool.
const ToolCallsSystemPrompt = "You are an agent operating a Linux shell to complete a task. Use the bash tool to run commands; you will see their output. When the task is done, reply without calling a tool."

func (toolCalls) Name() string                { return FormatToolCalls }
func (toolCalls) Tools() []any                { return []any{BashTool} }
func (toolCalls) Confirm() bool               { return false }
func (toolCalls) ConfirmPrompt(string) string { return "" }
func (toolCalls) Corrective(err error) string {
	return fmt.Sprintf("Your tool call could not be used: %s. Call the bash tool as <tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"...\"}}\n</tool_call>, or reply without a tool call when the task is done.\n", err)
}

func (toolCalls) Demo(cmds []string) []string {
	out := make([]string, 0, len(cmds)+1)
	for _, c := range cmds {
		out = append(out, "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": "+pythonJSONString(c)+"}}\n</tool_call>")
	}
	return append(out, "The task is complete.")
}

// pythonJSONString is s as a JSON string the way a template's tojson
// (Python's json.dumps, ensure_ascii off) writes it, which is how models
// trained on such calls write their arguments: Go's encoder would spell
// <, > and & as \u003c, \u003e, \u0026.
func pythonJSONString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func (toolCalls) Parse(text string) (Reply, error) {
	var r Reply
	rest := withoutThinking(text)
	for {
		open := strings.Index(rest, "<tool_call>")
		if open < 0 {
			break
		}
		rest = rest[open+len("<tool_call>"):]
		end := strings.Index(rest, "</tool_call>")
		if end < 0 {
			return r, errors.New("a <tool_call> has no closing </tool_call>")
		}
		body := rest[:end]
		rest = rest[end+len("</tool_call>"):]
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(body), &call); err != nil {
			return r, fmt.Errorf("the tool call is not a JSON object {\"name\", \"arguments\"}: %v", err)
		}
		if call.Name != "bash" {
			return r, fmt.Errorf("unknown tool %q (the only tool is bash)", call.Name)
		}
		var args struct {
			Command *string  `json:"command"`
			Timeout *float64 `json:"timeout"`
		}
		dec := json.NewDecoder(bytes.NewReader(call.Arguments))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&args); err != nil {
			return r, fmt.Errorf("bash's arguments are not {\"command\", \"timeout\"}: %v", err)
		}
		if args.Command == nil || strings.TrimSpace(*args.Command) == "" {
			return r, errors.New("bash was called without a command")
		}
		c := Command{Script: strings.TrimSpace(*args.Command)}
		if args.Timeout != nil {
			if *args.Timeout <= 0 || *args.Timeout > 86400 || math.IsNaN(*args.Timeout) {
				return r, fmt.Errorf("timeout %v: want seconds in (0, 86400]", *args.Timeout)
			}
			c.Timeout = time.Duration(*args.Timeout * float64(time.Second))
		}
		if len(r.Commands) == MaxCommandsPerReply {
			return r, fmt.Errorf("more than %d commands in one reply", MaxCommandsPerReply)
		}
		r.Commands = append(r.Commands, c)
	}
	if strings.Contains(rest, "</tool_call>") {
		return r, errors.New("a </tool_call> closes no <tool_call>")
	}
	r.Complete = len(r.Commands) == 0
	return r, nil
}
