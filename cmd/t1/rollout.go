package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/tokenizer"
	"github.com/t1pipe/t1/trial"
)

func rolloutCmd(g *globals) *cobra.Command {
	var policy, backend, rowsOut string
	var maxTurns, contextTokens int
	var seed uint64
	var verify bool
	cmd := &cobra.Command{
		Use:   "rollout --task DIR",
		Short: "Play one episode of a task and print the transcript",
		Long: `Starts a fresh sandbox of the task, lets the policy work in it turn by turn, prints
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
before the sandbox starts, never an episode that ends before its first turn.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			task, _ := cmd.Flags().GetString("task")
			if task == "" {
				return fmt.Errorf("--task is required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(task)
			if err != nil {
				return err
			}
			t, err := harbor.Load(dir)
			if err != nil {
				return err
			}
			if backend == "" {
				backend = cfg.Sandbox.Backend
			}
			be, err := cfg.Sandbox.NewBackend(backend)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var pol inference.Engine
			var tok tokenizer.Tokenizer
			modelContext := 0 // the model's own limit; 0 when no model bounds it
			experts := 0      // the model's expert count, which the routing codec needs
			switch policy {
			case "oracle":
				if tok, err = moe.DefaultTokenizer(); err != nil {
					return err
				}
			case "config":
				opts := pipeline.InferenceOptions(cfg.Inference)
				var served *servedModel
				if opts.Backend != inference.BackendReference && opts.Checkpoint != "" {
					if served, err = loadServed(opts.Checkpoint); err != nil {
						return err
					}
					opts.Model = served.shape
				} else if err := referenceOnly(opts.Checkpoint); err != nil {
					return err
				}
				if err := inference.Probe(ctx, opts); err != nil {
					return err
				}
				if pol, err = inference.Open(ctx, opts, nil); err != nil {
					return err
				}
				switch r, ok := pol.(*inference.Reference); {
				case ok:
					tok, modelContext, experts = r.Tokenizer(), r.Config().Context, r.Config().Experts
				case served != nil:
					tok, modelContext, experts = served.tok, served.shape.Context, served.shape.Experts
				default:
					// A remote engine without a checkpoint: a model of the
					// configured shape with t1's default tokenizer.
					if tok, err = moe.DefaultTokenizer(); err != nil {
						return err
					}
					if tok.VocabSize() > opts.Model.Vocab {
						return fmt.Errorf("inference.model.vocab %d is below the default tokenizer's %d ids: set inference.checkpoint to the served model's directory", opts.Model.Vocab, tok.VocabSize())
					}
					experts = opts.Model.Experts
				}
			default:
				return fmt.Errorf("--policy %q: want config or oracle", policy)
			}
			ec := pipeline.Episode(cfg)
			chat, err := ec.Chat(tok)
			if err != nil {
				return err
			}
			format, err := ec.Format()
			if err != nil {
				return err
			}
			if policy == "oracle" {
				if pol, err = agent.FromSolution(chat, format, string(t.Files[harbor.SolutionPath].Data)); err != nil {
					return err
				}
			}
			ec.MaxTurns = maxTurns
			ec.Sampling.Seed = seed
			if ec.Context, err = episodeContext(chat, t.Instruction, ec, policy, contextTokens, modelContext); err != nil {
				return err
			}
			sb, err := be.Start(ctx, sandbox.Spec{TaskDir: dir, Limits: cfg.Sandbox.SandboxLimits()})
			if err != nil {
				return err
			}
			defer sb.Close()
			sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
			if err != nil {
				return err
			}
			defer sh.Close()
			out := cmd.OutOrStdout()
			if info := sb.Info(); !info.Isolated {
				fmt.Fprintf(out, "WARNING: %s\n", info.Reason)
			}
			fmt.Fprintf(out, "=== task %s (context %d tokens)\n%s\n", t.Name, ec.Context, strings.TrimSpace(t.Instruction))
			res, err := agent.Run(ctx, pol, chat, sh, t.Instruction, ec, func(tr agent.Turn) { printTurn(out, tr) })
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "=== %s after %d turns, %d sampled tokens, %d chunks, repairs %v, loss drift %d, malformed %d\n",
				res.Termination, len(res.Turns), res.Sampled, len(res.Chunks), res.Repairs, res.LossDrift, res.Malformed)
			if rowsOut != "" {
				if err := writeRows(rowsOut, t.Name, res, experts); err != nil {
					return err
				}
			}
			if !verify {
				return nil
			}
			// The agent's shell and its jobs end before the verifier starts,
			// which runs in a fresh sandbox on what the agent left.
			sh.Close()
			rep, _, _, err := trial.Verify(ctx, sb, dir, t, trial.Options{Backend: be, Limits: cfg.Sandbox.SandboxLimits(), AllowUnisolated: cfg.Sandbox.AllowUnisolated})
			if err != nil {
				return err
			}
			rf, _ := verifier.NewRewardFunc(verifier.ModeCount, 1)
			fmt.Fprintf(out, "=== verifier (%s): passed %d/%d, solved %t, reward %g\n", rep.Source, rep.Passed, rep.Total, rep.Solved, rf.Score(rep).Value)
			return nil
		},
	}
	cmd.Flags().String("task", "", "Harbor task directory")
	cmd.Flags().StringVar(&policy, "policy", "config", "config (the inference section) or oracle (replay the reference solution)")
	cmd.Flags().StringVar(&backend, "backend", "", "sandbox backend: auto, bwrap or process (default: the config's)")
	cmd.Flags().IntVar(&maxTurns, "max-turns", 300, "turn limit")
	cmd.Flags().IntVar(&contextTokens, "context", 0, "context in tokens (default: the model's; see above)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "sampling seed")
	cmd.Flags().BoolVar(&verify, "verify", true, "run the verifier on the final state")
	cmd.Flags().StringVar(&rowsOut, "rows", "", "write the attempt's table rows (tokens, routing, turns, trajectory), as a rollout stores them, to this JSON file")
	return cmd
}

// servedModel is what a rollout needs of a model a remote engine serves.
type servedModel struct {
	shape moe.Config
	tok   tokenizer.Tokenizer
}

// loadServed reads the checkpoint directory of a model a remote engine
// serves: its config.json's dimensions (the routing's layers, top-k and
// experts, the vocabulary, the context) and its tokenizer with the chat
// template beside it, of any architecture, and never its weights, which
// the engine holds (the directory need not have them).
func loadServed(dir string) (*servedModel, error) {
	if !inference.IsLocalCheckpoint(dir) {
		return nil, fmt.Errorf("inference.checkpoint %q: not a local directory holding %s: t1 rollout reads the served model's %s and tokenizer files from its directory", dir, moe.ConfigFile, moe.ConfigFile)
	}
	shape, _, tok, err := moe.LoadServed(dir)
	if err != nil {
		return nil, fmt.Errorf("inference.checkpoint: %w", err)
	}
	return &servedModel{shape: shape, tok: tok}, nil
}

// referenceOnly refuses, before anything starts, a local checkpoint of an
// architecture the in-process reference engine does not run.
func referenceOnly(dir string) error {
	if dir == "" || !inference.IsLocalCheckpoint(dir) {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, moe.ConfigFile))
	if err != nil {
		return fmt.Errorf("inference.checkpoint: %w", err)
	}
	_, modelType, err := moe.ParseShape(b)
	if err != nil {
		return fmt.Errorf("inference.checkpoint %s: %w", dir, err)
	}
	if modelType != moe.ModelType {
		return fmt.Errorf("inference.checkpoint %s: model_type %q: the reference engine (inference.backend: reference) runs only %s; serve this model with SGLang or vLLM and set inference.backend: sglang (or vllm) and inference.url", dir, modelType, moe.ModelType)
	}
	return nil
}

// episodeContext is the context an episode runs with: flag when set, else
// the model's own (modelContext, 0 when unknown: the configuration's
// then), and for the oracle, which no model bounds, the configuration's
// plus the first turn when that would take most of it. It fails when the first turn does
// not fit, saying what would.
func episodeContext(chat agent.Chat, instruction string, ec agent.Config, policy string, flag, modelContext int) (int, error) {
	need, err := agent.FirstTurnTokens(chat, instruction, ec)
	if err != nil {
		return 0, err
	}
	switch {
	case flag < 0:
		return 0, fmt.Errorf("--context %d: want a positive number of tokens", flag)
	case flag > 0 && modelContext > 0 && flag > modelContext:
		return 0, fmt.Errorf("--context %d: over the model's context of %d tokens (from its checkpoint)", flag, modelContext)
	case flag > 0:
		ec.Context = flag
	case modelContext > 0:
		ec.Context = modelContext
	case policy == "oracle" && 4*need > 3*ec.Context:
		// No model bounds a replay: the first turn comes on top, so the
		// configured context is left for the turns after it.
		ec.Context += need
	}
	if need <= ec.Context {
		return ec.Context, nil
	}
	if modelContext > 0 && need > modelContext {
		return 0, fmt.Errorf("the task's first turn takes %d tokens (system prompt, instruction and one reply), over the model's context of %d tokens (from its checkpoint): use a model with a longer context", need, modelContext)
	}
	return 0, fmt.Errorf("the task's first turn takes %d tokens (system prompt, instruction and one reply), over the context of %d tokens: pass --context %d or more", need, ec.Context, need)
}

// writeRows writes the rows the rollout stage would store for this episode.
func writeRows(path, task string, res *agent.Result, experts int) error {
	rows, err := agent.AttemptRows("rollout", schemas.RolloutRequestedPayload{TaskID: task}, res, experts, "", 0)
	if err != nil {
		return fmt.Errorf("--rows: %w", err)
	}
	b, err := json.MarshalIndent(rows, "", " ")
	if err != nil {
		return fmt.Errorf("--rows: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--rows: %w", err)
	}
	return nil
}

func printTurn(w io.Writer, tr agent.Turn) {
	fmt.Fprintf(w, "--- turn %d (chunk %d, %d tokens)\n", tr.Index, tr.Chunk, tr.Sampled)
	fmt.Fprintf(w, "assistant: %s\n", strings.TrimSpace(tr.Reply))
	if tr.Observation != "" {
		fmt.Fprintf(w, "observation:\n%s", tr.Observation)
		if !strings.HasSuffix(tr.Observation, "\n") {
			fmt.Fprintln(w)
		}
	}
}
