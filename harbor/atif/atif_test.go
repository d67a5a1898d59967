package atif

import (
	"slices"
	"strings"
	"testing"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/schemas"
)

// Two turns in one chunk: the agent steps carry the commands as tool
// calls, the observation, and each turn's prompt length, sampled ids and
// log-probs, read from the token row's loss region at the turn offsets.
func TestFromRows(t *testing.T) {
	traj := schemas.TrajectoryRow{Run: "r", TaskID: "t", Attempt: 2, Iteration: 1, Purpose: "train", PolicyVersion: 3, Termination: agent.EndComplete, Chunks: 1}
	turns := []schemas.TurnRow{ // out of order: FromRows sorts them
		{Turn: 1, Action: "<task_complete/>"},
		{Turn: 0, Action: `<command>echo one</command><command timeout="5">echo two</command>`, Observation: "$ echo one\none\n$ echo two\ntwo\n"},
	}
	tokens := []schemas.TokenRow{{
		TokenIDs:    []int32{1, 2, 3, 10, 11, 4, 5, 12},
		LogProbs:    []float32{0, 0, 0, -0.5, -0.25, 0, 0, -1},
		LossMask:    []bool{false, false, false, true, true, false, false, true},
		TurnOffsets: []int32{3, 7},
	}}
	a, err := FromRows(traj, agent.Tags(), agent.SystemPrompt, "Say one and two.", turns, tokens)
	if err != nil {
		t.Fatal(err)
	}
	if a.SchemaVersion != Version || a.SessionID != "r/t/a2/i1" || a.Agent.ModelName != "policy-v3" || len(a.Steps) != 4 ||
		a.Steps[0].Message != agent.SystemPrompt || a.Steps[1].Message != "Say one and two." {
		t.Fatalf("%+v", a)
	}
	s := a.Steps[2]
	if len(s.ToolCalls) != 2 || s.ToolCalls[1].Arguments["command"] != "echo two" || s.ToolCalls[1].Arguments["timeout_sec"] != 5.0 ||
		!strings.Contains(s.Observation.Results[0].Content, "two") {
		t.Fatalf("%+v", s)
	}
	if m := s.Metrics; m == nil || m.PromptTokens != 3 || !slices.Equal(m.CompletionTokenIDs, []int32{10, 11}) || !slices.Equal(m.LogProbs, []float32{-0.5, -0.25}) {
		t.Fatalf("metrics %+v", s.Metrics)
	}
	if m := a.Steps[3].Metrics; m == nil || m.PromptTokens != 7 || m.CompletionTokens != 1 || a.Steps[3].Observation != nil {
		t.Fatalf("last step %+v", a.Steps[3])
	}
	if f := a.FinalMetrics; f.TotalSteps != 4 || f.TotalCompletionTokens != 3 || f.TotalPromptTokens != 10 {
		t.Fatalf("final metrics %+v", f)
	}
}

// Replies are read with the action format the harness used: the same
// commands written as Terminus-2's JSON or as native tool calls become the
// same tool calls, and a reply the format cannot read is marked.
func TestFromRowsActionFormats(t *testing.T) {
	traj := schemas.TrajectoryRow{Run: "r", TaskID: "t", Termination: agent.EndComplete, Chunks: 1}
	for _, c := range []struct {
		format string
		reply  string
	}{
		{agent.FormatTerminus, `{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "echo one\n", "duration": 5}, {"keystrokes": "echo two\n", "duration": 5}], "task_complete": false}`},
		{agent.FormatToolCalls, "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"echo one\", \"timeout\": 5}}\n</tool_call>\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"echo two\", \"timeout\": 5}}\n</tool_call>"},
	} {
		f, err := agent.NewFormat(c.format)
		if err != nil {
			t.Fatal(err)
		}
		turns := []schemas.TurnRow{{Turn: 0, Action: c.reply}, {Turn: 1, Action: "<command>echo three</command>"}}
		a, err := FromRows(traj, f, agent.SystemPrompt, "Say one and two.", turns, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := a.Steps[2]
		if len(s.ToolCalls) != 2 || s.ToolCalls[0].Arguments["command"] != "echo one" || s.ToolCalls[1].Arguments["command"] != "echo two" || s.Extra != nil {
			t.Fatalf("%s: %+v", c.format, s)
		}
		// t1's tags are not this format's: no tool call is read from them.
		if last := a.Steps[3]; len(last.ToolCalls) != 0 {
			t.Fatalf("%s read tags as commands: %+v", c.format, last)
		}
	}
	if _, err := FromRows(traj, nil, agent.SystemPrompt, "x", nil, nil); err == nil {
		t.Fatal("no format accepted")
	}
}
