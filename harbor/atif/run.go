package atif

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

// WriteRun writes every attempt of run (of purpose, when not empty) as an
// ATIF file in dir, <task>-a<attempt>-i<iteration>-v<policy>-<purpose>.json,
// following its rollout.completed events to their trajectory, turns and
// tokens objects; replies are read with format and the episode's prompt
// is systemPrompt, as the run's harness had them. It returns how many
// files it wrote.
func WriteRun(ctx context.Context, l *engine.Log, st store.ObjectStore, run, purpose string, format agent.Format, systemPrompt, dir string) (int, error) {
	instructions := map[string]string{}
	n := 0
	err := l.Replay(ctx, []string{engine.Subject(run, schemas.RolloutCompleted)}, engine.ReplayFrom{}, func(ev engine.Event) error {
		var p schemas.RolloutCompletedPayload
		if err := ev.Decode(&p); err != nil {
			return err
		}
		if purpose != "" && p.Purpose != purpose {
			return nil
		}
		traj, err := schemas.ReadRows[schemas.TrajectoryRow](ctx, st, p.Trajectory.Key, &p.Trajectory)
		if err != nil {
			return err
		}
		if len(traj) != 1 {
			return fmt.Errorf("%s: %d trajectory rows, want 1", p.Trajectory.Key, len(traj))
		}
		turns, err := schemas.ReadRows[schemas.TurnRow](ctx, st, p.TurnRows.Key, &p.TurnRows)
		if err != nil {
			return err
		}
		tokens, err := schemas.ReadRows[schemas.TokenRow](ctx, st, p.TokenRows.Key, &p.TokenRows)
		if err != nil {
			return err
		}
		instr, ok := instructions[p.TaskID]
		if !ok {
			dir, err := os.MkdirTemp("", "t1-export-")
			if err != nil {
				return err
			}
			t, err := trial.FetchBundle(ctx, st, keys.Bundle(run, p.TaskID), "", filepath.Join(dir, "task"))
			os.RemoveAll(dir)
			if err != nil {
				return err
			}
			instr = t.Instruction
			instructions[p.TaskID] = instr
		}
		a, err := FromRows(traj[0], format, systemPrompt, instr, turns, tokens)
		if err != nil {
			return err
		}
		data, err := json.MarshalIndent(a, "", "  ")
		if err != nil {
			return err
		}
		name := fmt.Sprintf("%s-a%d-i%d-v%d-%s.json", p.TaskID, p.Attempt, p.Iteration, p.PolicyVersion, p.Purpose)
		if err := os.WriteFile(filepath.Join(dir, name), append(data, '\n'), 0o644); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}
