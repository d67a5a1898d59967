// Package atif exports rollouts in Harbor's Agent Trajectory Interchange
// Format (ATIF): one JSON trajectory per attempt, built from the attempt's
// stored trajectory, turn and token rows (FromRows), or every attempt of a
// run as its events name them, in Harbor's job and trial layout with each
// trial's reward and verdict, which `harbor view` opens (WriteRun, `t1
// export atif`; job.go cites the Harbor models it follows). It lives apart
// from package harbor, which reads task directories with no dependency on
// the pipeline's tables or its agent harness.
package atif

import (
	"errors"
	"fmt"
	"sort"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/schemas"
)

// Version is the Agent Trajectory Interchange Format version written.
const Version = "ATIF-v1.4"

// Trajectory is a trajectory in Harbor's Agent Trajectory Interchange Format:
// a system step, the instruction as a user step, then one agent step per
// turn with its commands as tool calls, the observation, and the exact
// prompt length, completion token ids and log-probs of the turn.
type Trajectory struct {
	SchemaVersion string         `json:"schema_version"`
	SessionID     string         `json:"session_id"`
	Agent         Agent          `json:"agent"`
	Steps         []Step         `json:"steps"`
	Notes         string         `json:"notes,omitempty"`
	FinalMetrics  FinalMetrics   `json:"final_metrics"`
	Extra         map[string]any `json:"extra,omitempty"`
}

// Agent names the agent.
type Agent struct {
	Name      string `json:"name"`
	Version   string `json:"version"`
	ModelName string `json:"model_name,omitempty"`
}

// Step is one step.
type Step struct {
	StepID      int            `json:"step_id"`
	Source      string         `json:"source"` // system | user | agent
	Message     string         `json:"message"`
	ToolCalls   []ToolCall     `json:"tool_calls,omitempty"`
	Observation *Observation   `json:"observation,omitempty"`
	Metrics     *Metrics       `json:"metrics,omitempty"`
	Extra       map[string]any `json:"extra,omitempty"`
}

// ToolCall is one command.
type ToolCall struct {
	ToolCallID   string         `json:"tool_call_id"`
	FunctionName string         `json:"function_name"`
	Arguments    map[string]any `json:"arguments"`
}

// Observation holds what the commands printed.
type Observation struct {
	Results []Result `json:"results"`
}

// Result is one observation.
type Result struct {
	SourceCallID string `json:"source_call_id,omitempty"`
	Content      string `json:"content"`
}

// Metrics are a turn's token figures.
type Metrics struct {
	PromptTokens       int       `json:"prompt_tokens"`
	CompletionTokens   int       `json:"completion_tokens"`
	CompletionTokenIDs []int32   `json:"completion_token_ids,omitempty"`
	LogProbs           []float32 `json:"logprobs,omitempty"`
}

// FinalMetrics sum the turns.
type FinalMetrics struct {
	TotalPromptTokens     int `json:"total_prompt_tokens"`
	TotalCompletionTokens int `json:"total_completion_tokens"`
	TotalSteps            int `json:"total_steps"`
}

// FromRows builds the ATIF trajectory of one attempt from its stored rows.
// Commands are re-read from each turn's reply with the action format the
// harness parsed it with (tags, Terminus-2's JSON or native tool calls).
func FromRows(traj schemas.TrajectoryRow, format agent.Format, systemPrompt, instruction string, turns []schemas.TurnRow, tokens []schemas.TokenRow) (*Trajectory, error) {
	if format == nil {
		return nil, errors.New("atif: no action format to read the replies with")
	}
	sort.Slice(turns, func(i, j int) bool { return turns[i].Turn < turns[j].Turn })
	chunks := map[int32]schemas.TokenRow{}
	for _, t := range tokens {
		chunks[t.Chunk] = t
	}
	a := &Trajectory{
		SchemaVersion: Version,
		SessionID:     fmt.Sprintf("%s/%s/a%d/i%d", traj.Run, traj.TaskID, traj.Attempt, traj.Iteration),
		Agent:         Agent{Name: "t1-terminus", Version: "1", ModelName: fmt.Sprintf("policy-v%d", traj.PolicyVersion)},
		Extra: map[string]any{"task_id": traj.TaskID, "attempt": traj.Attempt, "purpose": traj.Purpose,
			"termination": traj.Termination, "chunks": traj.Chunks, "snapshot_key": traj.SnapshotKey},
		Steps: []Step{
			{StepID: 1, Source: "system", Message: systemPrompt},
			{StepID: 2, Source: "user", Message: instruction},
		},
	}
	next := map[int32]int{} // turn index within each chunk
	for _, t := range turns {
		s := Step{StepID: len(a.Steps) + 1, Source: "agent", Message: t.Action}
		r, perr := format.Parse(t.Action)
		for i, c := range r.Commands {
			s.ToolCalls = append(s.ToolCalls, ToolCall{
				ToolCallID: fmt.Sprintf("t%d-c%d", t.Turn, i), FunctionName: "bash",
				Arguments: map[string]any{"command": c.Script, "timeout_sec": c.Timeout.Seconds()},
			})
		}
		if perr != nil {
			s.Extra = map[string]any{"parse_error": perr.Error()}
		}
		if t.Observation != "" {
			s.Observation = &Observation{Results: []Result{{Content: t.Observation}}}
		}
		if c, ok := chunks[t.Chunk]; ok {
			k := next[t.Chunk]
			next[t.Chunk]++
			if k < len(c.TurnOffsets) {
				m := turnMetrics(c, int(c.TurnOffsets[k]))
				s.Metrics = &m
				a.FinalMetrics.TotalPromptTokens += m.PromptTokens
				a.FinalMetrics.TotalCompletionTokens += m.CompletionTokens
			}
		}
		a.Steps = append(a.Steps, s)
	}
	a.FinalMetrics.TotalSteps = len(a.Steps)
	return a, nil
}

// turnMetrics reads the sampled ids of the turn starting at off: the run
// of loss-region ids there.
func turnMetrics(c schemas.TokenRow, off int) Metrics {
	m := Metrics{PromptTokens: off}
	for i := off; i < len(c.TokenIDs) && i < len(c.LossMask) && c.LossMask[i]; i++ {
		m.CompletionTokenIDs = append(m.CompletionTokenIDs, c.TokenIDs[i])
		m.LogProbs = append(m.LogProbs, c.LogProbs[i])
	}
	m.CompletionTokens = len(m.CompletionTokenIDs)
	return m
}
