// Package episode plays one episode of a task outside a run, as
// `t1 rollout` does: a fresh sandbox, the policy turn by turn, the
// transcript printed as it goes, then the task's verifier.
package episode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/jsonout"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/trial"
)

// Help is what `t1 rollout` says of itself.
const Help = `Starts a fresh sandbox of the task, lets the policy work in it turn by turn, prints
every reply and observation, then runs the task's verifier on the final state.

--policy config uses the inference section of the configuration (the reference MoE
by default, or an SGLang/vLLM server); --policy oracle replays the task's reference
solution one top-level shell statement per turn through the same harness. A served
model's inference.checkpoint is a local Hugging Face directory of any architecture
(qwen3_moe, …): its config.json gives the routing's shape and the context, its
tokenizer files the tokenizer and chat template; its weights are not read and need
not be there. The reference engine runs only t1's own architecture (t1_moe). The episode
is bounded as the pipeline's rollouts are, by stages.rollout, except for its context:
--context, by default the model's own (its checkpoint's; the configuration's for a
served model without one; for the oracle, stages.rollout.context plus what
the task's first turn needs, when that takes more than three quarters of it). An instruction that does not fit is an error
before the sandbox starts, never an episode that ends before its first turn.`

// Options name the task and how the episode is played.
type Options struct {
	pipeline.StandaloneOptions
	// Task is the Harbor task directory.
	Task string
	// Backend is the sandbox backend; empty takes the configuration's.
	Backend string
	// Rows, when set, is a JSON file the attempt's table rows are written
	// to, as a rollout stores them.
	Rows string
	// Verify runs the verifier on the final state.
	Verify bool
	// JSON prints one Summary object when the episode is done in place of
	// the transcript as it goes.
	JSON bool
}

// Summary is the episode as --json prints it.
type Summary struct {
	Task        string         `json:"task"`
	Context     int            `json:"context"`
	Isolated    bool           `json:"isolated"`
	Termination string         `json:"termination"`
	Turns       []Turn         `json:"turns"`
	Sampled     int            `json:"sampled_tokens"`
	Chunks      int            `json:"chunks"`
	Repairs     map[string]int `json:"repairs"`
	LossDrift   int            `json:"loss_drift"`
	Malformed   int            `json:"malformed_replies"`
	// Interrupted counts the commands stopped by their time limit.
	Interrupted int      `json:"interrupted_commands,omitempty"`
	Verifier    *Verdict `json:"verifier,omitempty"`
}

// Turn is one turn of a Summary.
type Turn struct {
	Index       int    `json:"index"`
	Chunk       int    `json:"chunk"`
	Sampled     int    `json:"sampled_tokens"`
	Reply       string `json:"reply"`
	Observation string `json:"observation"`
}

// Verdict is the verifier's, when it ran.
type Verdict struct {
	Source string  `json:"source"`
	Passed int     `json:"passed"`
	Total  int     `json:"total"`
	Solved bool    `json:"solved"`
	Reward float64 `json:"reward"`
}

// Play plays the episode, printing its transcript to out.
func Play(ctx context.Context, out io.Writer, cfg config.Config, o Options) (err error) {
	dir, err := filepath.Abs(o.Task)
	if err != nil {
		return err
	}
	t, err := harbor.Load(dir)
	if err != nil {
		return err
	}
	opt, err := cfg.Sandbox.TrialOptions(o.Backend)
	if err != nil {
		return err
	}
	o.Solution, o.Instruction = string(t.Files[harbor.SolutionPath].Data), t.Instruction
	ep, err := pipeline.StandaloneEpisode(ctx, cfg, o.StandaloneOptions)
	if err != nil {
		return err
	}
	oracle := o.Policy == "oracle"
	if oracle {
		// The solution's commands get the task's own time limit, as
		// `t1 tasks check` gives solve.sh.
		ep.Config = ep.Config.ForSolution(t.Config.AgentTimeout())
	}
	// As a rollout's: the configured network policy and the task's own.
	sb, err := opt.Start(ctx, dir)
	if err != nil {
		return err
	}
	defer sb.Close()
	sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
	if err != nil {
		return err
	}
	defer sh.Close()
	text := out
	if o.JSON {
		text = io.Discard
	}
	sum := Summary{Task: t.Name, Context: ep.Config.Context, Isolated: sb.Info().Isolated, Repairs: map[string]int{}}
	if info := sb.Info(); !info.Isolated {
		fmt.Fprintf(text, "WARNING: %s\n", info.Reason)
	}
	fmt.Fprintf(text, "=== task %s (context %d tokens)\n%s\n", t.Name, ep.Config.Context, strings.TrimSpace(t.Instruction))
	res, err := agent.Run(ctx, ep.Engine, ep.Chat, sh, t.Instruction, ep.Config, func(tr agent.Turn) {
		writeTurn(text, tr)
		sum.Turns = append(sum.Turns, Turn{Index: tr.Index, Chunk: tr.Chunk, Sampled: tr.Sampled, Reply: tr.Reply, Observation: tr.Observation})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(text, "=== %s after %d turns, %d sampled tokens, %d chunks, repairs %v, loss drift %d, malformed %d\n",
		res.Termination, len(res.Turns), res.Sampled, len(res.Chunks), res.Repairs, res.LossDrift, res.Malformed)
	sum.Termination, sum.Sampled, sum.Chunks, sum.LossDrift, sum.Malformed = string(res.Termination), res.Sampled, len(res.Chunks), res.LossDrift, res.Malformed
	for k, v := range res.Repairs {
		sum.Repairs[string(k)] = v
	}
	sum.Interrupted = res.Interrupted
	if oracle {
		// A replay that did not run whole is not the solution's: it says
		// so and the command fails, after the verdict.
		if cut := res.CutShort(); cut != nil {
			fmt.Fprintf(text, "=== %v\n", cut)
			defer func() {
				if err == nil {
					err = cut
				}
			}()
		}
	}
	defer func() {
		if err == nil && o.JSON {
			err = jsonout.Write(out, sum)
		}
	}()
	if o.Rows != "" {
		if err := writeRows(o.Rows, t.Name, res, ep.Experts); err != nil {
			return err
		}
	}
	if !o.Verify {
		return nil
	}
	// The agent's shell and its jobs end before the verifier starts,
	// which runs in a fresh sandbox on what the agent left.
	sh.Close()
	rep, _, _, err := trial.Verify(ctx, sb, dir, t, opt)
	if err != nil {
		return err
	}
	rf, _ := verifier.NewRewardFunc(verifier.ModeCount, 1)
	sum.Verifier = &Verdict{Source: string(rep.Source), Passed: rep.Passed, Total: rep.Total, Solved: rep.Solved, Reward: rf.Score(rep).Value}
	fmt.Fprintf(text, "=== verifier (%s): passed %d/%d, solved %t, reward %g\n", rep.Source, rep.Passed, rep.Total, rep.Solved, rf.Score(rep).Value)
	for _, p := range rep.Problems {
		fmt.Fprintf(text, "=== verifier note: %s\n", p)
	}
	if rep.Output != "" {
		fmt.Fprintf(text, "=== verifier output (end):\n%s\n", strings.TrimRight(rep.Output, "\n"))
	}
	return nil
}

// writeRows writes the rows the rollout stage would store for this episode.
func writeRows(path, task string, res *agent.Result, experts int) error {
	rows, err := agent.AttemptRows("rollout", schemas.RolloutRequestedPayload{TaskID: task}, res, experts, "", 0)
	if err == nil {
		var b []byte
		if b, err = json.MarshalIndent(rows, "", " "); err == nil {
			err = os.WriteFile(path, append(b, '\n'), 0o644)
		}
	}
	if err != nil {
		return fmt.Errorf("--rows: %w", err)
	}
	return nil
}

func writeTurn(w io.Writer, tr agent.Turn) {
	fmt.Fprintf(w, "--- turn %d (chunk %d, %d tokens)\n", tr.Index, tr.Chunk, tr.Sampled)
	fmt.Fprintf(w, "assistant: %s\n", strings.TrimSpace(tr.Reply))
	if tr.Observation != "" {
		fmt.Fprintf(w, "observation:\n%s", tr.Observation)
		if !strings.HasSuffix(tr.Observation, "\n") {
			fmt.Fprintln(w)
		}
	}
}
