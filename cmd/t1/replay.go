package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/lineage"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/schemas"
)

func replayCmd(g *globals) *cobra.Command {
	var stage, run, into, since string
	var fromSeq uint64
	var cont bool
	var iteration int
	var set map[string]string
	cmd := &cobra.Command{
		Use:   "replay --stage S --run R --into B [--from-seq N | --since T | --continue [--iteration I]] [--set key=value]...",
		Short: "Re-run one stage over a run's past inputs into a branch, leaving the original untouched; --continue carries on from there",
		Long: `Opens run B as a branch of run R and hands the inputs of stage S in R to the stage as if they
belonged to B; what the stage emits goes into B. For example, re-score every attempt of a run
with a fixed verifier without rolling anything out again:

    t1 replay --stage reward --run main --into main-rescored

B's run.started names its parent and branch point and keeps what R froze (seed, model, iterations,
reward scale, pool); --set reward_scale=2, --set seed=9 or --set iterations=4 change one, and the
branch records and reports the change beside R's value. The stage reads what R's events point at
(bundles, snapshots, checkpoints, manifests) and writes under runs/B/; R is never written to.

Without --continue the stage re-runs every input of R (from --from-seq or --since, else from the
start) and nothing else runs: B's status is "replayed". With --continue the branch is R up to
iteration I (default 0) of stage S and a run of its own from there: S re-runs its inputs of that
iteration (sft: the fine-tuning before the first; eval: the evaluations from iteration I's policy
on), then every stage runs in this process until B completes, on consumers of B's own
(<stage>_<B>), as t1 ablate runs its branches — re-score, retrain and evaluate in the branch:

    t1 replay --stage reward --run main --into main-fixed --continue

S is one of rollout, reward, critic, ppo, sft or eval (without --continue also control, synth or
audit). Replaying into B again with the same options resumes it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stage == "" || into == "" {
				return fmt.Errorf("--stage and --into are required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if run == "" {
				run = cfg.Run.ID
			}
			o := pipeline.BranchOptions{Stage: stage, Parent: run, Into: into, Continue: cont, Iteration: iteration, Set: set}
			switch {
			case fromSeq > 0 && since != "":
				return fmt.Errorf("--from-seq and --since exclude each other")
			case fromSeq > 0:
				o.From.Seq = fromSeq
			case since != "":
				t, err := time.Parse(time.RFC3339, since)
				if err != nil {
					return fmt.Errorf("--since: want an RFC 3339 time such as 2026-11-29T20:00:00Z: %w", err)
				}
				o.From.Time = t
			}
			ctx := cmd.Context()
			in, err := local.Open(ctx, cfg, local.Options{Serve: cont})
			if err != nil {
				return err
			}
			defer in.Close()
			if !cont {
				p, err := pipeline.Build(cfg, in.Log, in.Store, pipeline.WithWorkDir(in.WorkDir))
				if err != nil {
					return err
				}
				res, err := p.Branch(ctx, in.Log, o)
				if err != nil {
					return err
				}
				out := replaySummary{BranchResult: res, Stage: stage, Run: run, Into: into}
				if g.json {
					return printJSON(cmd, out)
				}
				printReplay(cmd.OutOrStdout(), out)
				return nil
			}
			// Consumers of the branch's own: the log's shared ones, made
			// now in a data directory whose runs had consumers of their
			// own (t1 ablate), would deliver every earlier run's history
			// to this process's handlers, which redid all of its work
			// before the branch's first rollout.
			out, err := continueBranch(ctx, cmd.ErrOrStderr(), in, o, stagesOwn)
			if err != nil || out.Branch == nil {
				return err
			}
			sum := out.Branch
			if g.json {
				if err := printJSON(cmd, out); err != nil {
					return err
				}
			} else {
				printPipelineSummary(cmd.OutOrStdout(), *sum)
			}
			if sum.Status == "failed" {
				return fmt.Errorf("branch %s failed: %s (t1 events list --run %s --type run.failed)", into, sum.Reason, into)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&stage, "stage", "", "stage to re-run: rollout, reward, critic, ppo, sft or eval (without --continue also control, synth or audit)")
	f.StringVar(&run, "run", "", "source run (default: the config's run.id)")
	f.StringVar(&into, "into", "", "the branch: a new run id the stage's outputs go to")
	f.Uint64Var(&fromSeq, "from-seq", 0, "without --continue: start at this stream sequence")
	f.StringVar(&since, "since", "", "without --continue: start at this time (RFC 3339)")
	f.BoolVar(&cont, "continue", false, "after the stage, run the branch's downstream stages to its end")
	f.IntVar(&iteration, "iteration", 0, "with --continue: the source run's iteration the branch re-runs the stage at")
	f.StringToStringVar(&set, "set", nil, "change a setting the source run froze: "+strings.Join(pipeline.OverridableSettings(), ", ")+" (repeatable)")
	return cmd
}

// continueBranch branches o.Parent into o.Into at o.Stage (o.Continue)
// and runs the branch to its end in this process, on in's servers, with
// in's configuration; it reports the branch point's replay on w. A nil
// Branch in the result means the run was stopped (errStopped's case).
func continueBranch(ctx context.Context, w io.Writer, in *local.Infra, o pipeline.BranchOptions, at stagesAt) (replaySummary, error) {
	out := replaySummary{Stage: o.Stage, Run: o.Parent, Into: o.Into}
	p, err := pipeline.Build(in.Config, in.Log, in.Store, pipeline.WithWorkDir(in.WorkDir))
	if err != nil {
		return out, err
	}
	if out.BranchResult, err = p.Branch(ctx, in.Log, o); err != nil {
		return out, err
	}
	printReplay(w, out)
	// The latest version the branch took over; the versions its re-run
	// stage just made are its own, which its progress counts.
	var version int64
	err = lineage.History(ctx, in.Log, o.Into, []string{schemas.SFTCompleted, schemas.PolicyUpdated}, func(ev engine.Event) error {
		if ev.Run == o.Into {
			return nil
		}
		var p struct {
			PolicyVersion int64 `json:"policy_version"`
		}
		if err := ev.Decode(&p); err != nil {
			return err
		}
		version = max(version, p.PolicyVersion)
		return nil
	})
	if err != nil {
		return out, err
	}
	// The branch runs on as a run of its own, on the same servers.
	bin := *in
	bin.Config.Run.ID = o.Into
	out.Branch, err = executePipeline(ctx, w, &bin, at, newBranchStart(o.Stage, out.BranchResult, version))
	return out, err
}

type replaySummary struct {
	engine.BranchResult
	Stage  string           `json:"stage"`
	Run    string           `json:"run"`
	Into   string           `json:"into"`
	Branch *pipelineSummary `json:"branch,omitempty"` // with --continue: how the branch ended
}

func printReplay(w io.Writer, s replaySummary) {
	fmt.Fprintf(w, "stage %s: %d events of %s replayed into %s: %d emitted, %d failed\n",
		s.Stage, s.Inputs, s.Run, s.Into, s.Emitted, s.Failed)
}
