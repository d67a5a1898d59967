package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor/atif"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/trial"
)

func exportCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "export", Short: "Write a run's data in other formats"}
	var run, out, purpose string
	atifCmd := &cobra.Command{
		Use:   "atif --run R --out DIR",
		Short: "Write every attempt of a run as Harbor ATIF trajectory JSON (" + atif.Version + ")",
		Long: `Follows the run's rollout.completed events to their trajectory, turns and tokens
objects and writes one ATIF file per attempt: DIR/<task>-a<attempt>-i<iteration>-v<policy>-<purpose>.json.
Agent steps carry the commands as bash tool calls (read from each reply with the
configured stages.rollout.model.action_format), the observation, and the turn's
prompt length, completion token ids and sampler log-probs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			if run == "" {
				run = cfg.Run.ID
			}
			if out, err = filepath.Abs(out); err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			// Replies are read as the run's harness read them: with the
			// configured action format.
			format, err := cfg.Stages.Rollout.Config().Format()
			if err != nil {
				return err
			}
			in, err := local.Open(cmd.Context(), cfg, local.Options{})
			if err != nil {
				return err
			}
			defer in.Close()
			ctx := cmd.Context()
			instructions := map[string]string{}
			n := 0
			err = in.Log.Replay(ctx, []string{engine.Subject(run, schemas.RolloutCompleted)}, engine.ReplayFrom{}, func(ev engine.Event) error {
				var p schemas.RolloutCompletedPayload
				if err := ev.Decode(&p); err != nil {
					return err
				}
				if purpose != "" && p.Purpose != purpose {
					return nil
				}
				traj, err := schemas.ReadRows[schemas.TrajectoryRow](ctx, in.Store, p.Trajectory.Key, &p.Trajectory)
				if err != nil {
					return err
				}
				if len(traj) != 1 {
					return fmt.Errorf("%s: %d trajectory rows, want 1", p.Trajectory.Key, len(traj))
				}
				turns, err := schemas.ReadRows[schemas.TurnRow](ctx, in.Store, p.TurnRows.Key, &p.TurnRows)
				if err != nil {
					return err
				}
				tokens, err := schemas.ReadRows[schemas.TokenRow](ctx, in.Store, p.TokenRows.Key, &p.TokenRows)
				if err != nil {
					return err
				}
				instr, ok := instructions[p.TaskID]
				if !ok {
					dir, err := os.MkdirTemp("", "t1-export-")
					if err != nil {
						return err
					}
					t, err := trial.FetchBundle(ctx, in.Store, keys.Bundle(run, p.TaskID), "", filepath.Join(dir, "task"))
					os.RemoveAll(dir)
					if err != nil {
						return err
					}
					instr = t.Instruction
					instructions[p.TaskID] = instr
				}
				a, err := atif.FromRows(traj[0], format, in.Config.Stages.Rollout.SystemPrompt, instr, turns, tokens)
				if err != nil {
					return err
				}
				data, err := json.MarshalIndent(a, "", "  ")
				if err != nil {
					return err
				}
				name := fmt.Sprintf("%s-a%d-i%d-v%d-%s.json", p.TaskID, p.Attempt, p.Iteration, p.PolicyVersion, p.Purpose)
				if err := os.WriteFile(filepath.Join(out, name), append(data, '\n'), 0o644); err != nil {
					return err
				}
				n++
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d trajectories to %s\n", n, out)
			return nil
		},
	}
	atifCmd.Flags().StringVar(&run, "run", "", "run to export (default: the config's run.id)")
	atifCmd.Flags().StringVar(&out, "out", "", "directory for the JSON files")
	atifCmd.Flags().StringVar(&purpose, "purpose", "", "only train or only eval attempts")
	cmd.AddCommand(atifCmd)
	return cmd
}
