package main

import (
	"fmt"
	"io"
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
	"github.com/t1pipe/t1/trial"
)

func rolloutCmd(g *globals) *cobra.Command {
	var policy, backend string
	var maxTurns int
	var seed uint64
	var verify bool
	cmd := &cobra.Command{
		Use:   "rollout --task DIR",
		Short: "Play one episode of a task and print the transcript",
		Long: `Starts a fresh sandbox of the task, lets the policy work in it turn by turn, prints
every reply and observation, then runs the task's verifier on the final state.

--policy config uses the inference section of the configuration (the reference MoE
by default, or an SGLang/vLLM server); --policy oracle replays the task's reference
solution one command per turn through the same harness. The episode is bounded as
the pipeline's rollouts are, by stages.rollout.`,
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
			be, err := sandbox.ByName(backend, cfg.Sandbox.AllowUnisolated)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var pol inference.Engine
			var tok *moe.Tokenizer
			switch policy {
			case "oracle":
				if tok, err = moe.DefaultTokenizer(); err != nil {
					return err
				}
			case "config":
				opts := pipeline.InferenceOptions(cfg.Inference)
				if err := inference.Probe(ctx, opts); err != nil {
					return err
				}
				if pol, err = inference.Open(ctx, opts, nil); err != nil {
					return err
				}
				if r, ok := pol.(*inference.Reference); ok {
					tok = r.Tokenizer()
				} else {
					// A remote engine serves the model of inference.checkpoint:
					// its own tokenizer, not t1's default (which an empty
					// checkpoint means).
					ck, err := inference.LoadCheckpoint(ctx, cfg.Inference.Checkpoint, opts.Model, nil)
					if err != nil {
						return err
					}
					tok = ck.Tokenizer
				}
			default:
				return fmt.Errorf("--policy %q: want config or oracle", policy)
			}
			tp, err := moe.NewChat(tok)
			if err != nil {
				return err
			}
			if policy == "oracle" {
				if pol, err = agent.FromSolution(tp, string(t.Files[harbor.SolutionPath].Data)); err != nil {
					return err
				}
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
			fmt.Fprintf(out, "=== task %s\n%s\n", t.Name, strings.TrimSpace(t.Instruction))
			ec := pipeline.Episode(cfg)
			ec.MaxTurns = maxTurns
			ec.Sampling.Seed = seed
			res, err := agent.Run(ctx, pol, tp, sh, t.Instruction, ec, func(tr agent.Turn) { printTurn(out, tr) })
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "=== %s after %d turns, %d sampled tokens, %d chunks, repairs %v\n",
				res.Termination, len(res.Turns), res.Sampled, len(res.Chunks), res.Repairs)
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
	cmd.Flags().Uint64Var(&seed, "seed", 1, "sampling seed")
	cmd.Flags().BoolVar(&verify, "verify", true, "run the verifier on the final state")
	return cmd
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
