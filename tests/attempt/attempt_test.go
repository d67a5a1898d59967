// Package attempt_test plays attempts end to end through the real event
// log, store and sandboxes: rollout.requested → rollout → rollout.completed
// → reward → reward.scored, with a scripted agent replaying the reference
// solution and with the reference MoE policy.
package attempt_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/pipelinetest"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/rollout"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

const run = "att"

func TestRolloutAndReward(t *testing.T) {
	cfg := pipelinetest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := testinfra.Store(t)
	l := testinfra.Log(t)

	sp, err := taskgen.Build([]taskgen.StepRef{{Name: "source.csv", Seed: 3, Input: -1}, {Name: "csv.aggregate", Seed: 4, Input: 0}, {Name: "sys.checksum", Seed: 5, Input: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := sp.Task(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := trial.PutBundle(ctx, st, run, tk.Name, tk); err != nil {
		t.Fatal(err)
	}

	// Version 0 replays the reference solution; version 1 is the model
	// (the run's initial policy: PPO stores no version 1 here).
	solution := pipeline.WithPolicies(func(model rollout.Policies) rollout.Policies {
		return func(ctx context.Context, run string, v int64) (rollout.Policy, error) {
			pol, err := model(ctx, run, 0)
			if err != nil || v > 0 {
				return pol, err
			}
			chat, err := agent.Config{}.Chat(pol.Tokenizer)
			if err != nil {
				return pol, err
			}
			pol.Engine, err = agent.FromSolution(chat, agent.Tags(), sp.SolveScript())
			return pol, err
		}
	})
	cfg.Stages.Rollout.MaxNewTokens = 48
	// The stage's default scale is 1; the run freezes 0.5.
	p := pipelinetest.Run(t, cfg, l, st, testinfra.Runner(2), []string{"rollout", "reward"}, solution)
	rewardStage, err := p.Stage("reward")
	if err != nil {
		t.Fatal(err)
	}
	started, err := engine.NewRootEvent(run, schemas.RunStarted, "start", schemas.RunStartedPayload{Seed: 1, RewardScale: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, started); err != nil {
		t.Fatal(err)
	}

	for v := range int64(2) {
		ev, err := engine.NewRootEvent(run, schemas.RolloutRequested, fmt.Sprint(v), schemas.RolloutRequestedPayload{
			TaskID: tk.Name, Attempt: int(v), Purpose: "train", PolicyVersion: v, Seed: 11, MaxTurns: 12,
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	testinfra.CheckFor(t, 2*time.Minute, func() error {
		if n := testinfra.Count(t, l, "t1."+run+"."+schemas.RewardScored); n != 2 {
			return fmt.Errorf("%d of 2 attempts scored (failed: %d)", n, testinfra.Count(t, l, "t1."+run+".*.failed"))
		}
		return nil
	})

	scores := map[int]schemas.RewardScoredPayload{}
	for _, ev := range testinfra.Events(t, l, "t1."+run+"."+schemas.RewardScored) {
		var p schemas.RewardScoredPayload
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		scores[p.Attempt] = p
	}
	oracle := scores[0]
	if oracle.Total != len(sp.Checks) || oracle.Passed != oracle.Total || oracle.Reward != 0.5*float64(oracle.Total) || oracle.Fallback {
		t.Fatalf("the replayed reference solution scored %+v", oracle)
	}
	if model := scores[1]; model.Total != len(sp.Checks) {
		t.Fatalf("the model's attempt was not verified per assertion: %+v", model)
	}

	// Re-score every attempt into a branch run: rewards only, no rollout,
	// the original run untouched.
	before := testinfra.Count(t, l, "t1."+run+".>")
	res, err := l.Branch(ctx, rewardStage, run, "att-rescore", engine.ReplayFrom{}, "rescore", nil)
	if err != nil || res.Inputs != 2 || res.Emitted != 2 || res.Failed != 0 {
		t.Fatalf("branch: %+v, %v", res, err)
	}
	if n := testinfra.Count(t, l, "t1."+run+".>"); n != before {
		t.Fatalf("the original run changed: %d events, was %d", n, before)
	}
	if n := testinfra.Count(t, l, "t1.att-rescore."+schemas.RewardScored); n != 2 || testinfra.Count(t, l, "t1.att-rescore."+schemas.RolloutCompleted) != 0 {
		t.Fatalf("branch run holds %d rewards", n)
	}
	for _, ev := range testinfra.Events(t, l, "t1.att-rescore."+schemas.RewardScored) {
		var p schemas.RewardScoredPayload
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Attempt == 0 && p.Reward != float64(oracle.Total) { // the branch froze no scale: the stage's 1
			t.Fatalf("re-scored oracle attempt: %+v", p)
		}
		if !strings.HasPrefix(p.Rewards.Key, keys.Run("att-rescore")) {
			t.Fatalf("branch rewards stored at %s", p.Rewards.Key)
		}
	}

	for _, ev := range testinfra.Events(t, l, "t1."+run+"."+schemas.RolloutCompleted) {
		var p schemas.RolloutCompletedPayload
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Sandbox != "bwrap" || !p.Isolated || p.Bundle.Key == "" {
			t.Fatalf("attempt %d: sandbox %q isolated %v bundle %+v", p.Attempt, p.Sandbox, p.Isolated, p.Bundle)
		}
		traj, err := schemas.ReadRows[schemas.TrajectoryRow](ctx, st, p.Trajectory.Key, &p.Trajectory)
		if err != nil || len(traj) != 1 || traj[0].Sandbox != "bwrap" || !traj[0].Isolated {
			t.Fatalf("trajectory rows %+v (%v)", traj, err)
		}
		tokens, err := schemas.ReadRows[schemas.TokenRow](ctx, st, p.TokenRows.Key, &p.TokenRows)
		if err != nil {
			t.Fatal(err)
		}
		if len(tokens) != p.Chunks {
			t.Fatalf("attempt %d: %d token rows for %d chunks", p.Attempt, len(tokens), p.Chunks)
		}
		if p.PolicyVersion == 1 {
			routes, err := schemas.ReadRows[schemas.RoutingRow](ctx, st, p.RoutingRows.Key, &p.RoutingRows)
			if err != nil {
				t.Fatal(err)
			}
			if err := schemas.CheckAligned(p.TokenRows.Key, tokens, p.RoutingRows.Key, routes); err != nil {
				t.Fatal(err)
			}
			for _, r := range routes {
				if _, err := r.Decode(); err != nil {
					t.Fatal(err)
				}
			}
		}
		turns, err := schemas.ReadRows[schemas.TurnRow](ctx, st, p.TurnRows.Key, &p.TurnRows)
		if err != nil || len(turns) != p.Turns {
			t.Fatalf("attempt %d: %d turn rows for %d turns (%v)", p.Attempt, len(turns), p.Turns, err)
		}
	}

	// A second delivery of an attempt whose first one stored its snapshot
	// but no marker (it crashed, or still runs) plays again and takes the
	// stored snapshot: the bytes under a hash once announced never change.
	var first schemas.RolloutCompletedPayload
	for _, ev := range testinfra.Events(t, l, "t1."+run+"."+schemas.RolloutCompleted) {
		if err := ev.Decode(&first); err != nil {
			t.Fatal(err)
		}
		if first.Attempt == 0 {
			break
		}
	}
	req := schemas.RolloutRequestedPayload{TaskID: tk.Name, Attempt: 0, Purpose: "train", PolicyVersion: 0, Seed: 11, MaxTurns: 12}
	if err := st.Delete(ctx, keys.AttemptMarker(run, req.AttemptID())); err != nil {
		t.Fatal(err)
	}
	again, err := engine.NewRootEvent(run, schemas.RolloutRequested, "again", req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, again); err != nil {
		t.Fatal(err)
	}
	testinfra.CheckFor(t, 2*time.Minute, func() error {
		if n := testinfra.Count(t, l, "t1."+run+"."+schemas.RewardScored); n != 3 {
			return fmt.Errorf("%d of 3 attempts scored (failed: %d)", n, testinfra.Count(t, l, "t1."+run+".*.failed"))
		}
		return nil
	})
	for _, ev := range testinfra.Events(t, l, "t1."+run+"."+schemas.RolloutCompleted) {
		var p schemas.RolloutCompletedPayload
		if err := ev.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Attempt == 0 && p.Snapshot != first.Snapshot {
			t.Fatalf("the second delivery announced snapshot %+v, the first stored %+v", p.Snapshot, first.Snapshot)
		}
	}
}

// Floods, commands that never end, invalid UTF-8 and unusable replies all
// end up as bounded, storable turns with the reason visible.
func TestHostileEpisode(t *testing.T) {
	bw := testinfra.Bubblewrap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := testinfra.Store(t)
	sb, err := bw.Start(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	tok, _ := moe.DefaultTokenizer()
	own, _ := moe.NewChat(tok)
	tp := agent.OwnChat(own)
	pol := agent.NewScripted(tp, []string{
		"<command>yes flood | head -c 50000000</command>",
		"<command timeout=\"1\">sleep 1000</command>",
		"<command>printf 'bad \\xff\\xfe bytes \\xc3\\n'</command>",
		"<command>exec 1>&-; echo gone</command>",
		"<command",
		"<command>echo still alive</command><task_complete/>",
	})
	ec := agent.Config{MaxObservation: 4096}
	res, err := agent.Run(ctx, pol, tp, sh, "Survive.", ec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Termination != agent.EndComplete || len(res.Turns) != 6 {
		t.Fatalf("%s after %d turns", res.Termination, len(res.Turns))
	}
	for _, tr := range res.Turns {
		if len(tr.Observation) > ec.MaxObservation {
			t.Fatalf("turn %d: observation of %d bytes", tr.Index, len(tr.Observation))
		}
	}
	if !strings.Contains(res.Turns[0].Observation, "omitted") || !strings.Contains(res.Turns[1].Observation, "timed out") ||
		res.Turns[4].ParseError == "" || !strings.Contains(res.Turns[5].Observation, "still alive") {
		t.Fatalf("turns: %+v", res.Turns)
	}
	rows, err := agent.AttemptRows("hostile", schemas.RolloutRequestedPayload{TaskID: "x", Purpose: "train"}, res, 8, "", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := schemas.WriteTable(ctx, st, "hostile", 0, rows.Turns, schemas.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := schemas.ReadRows[schemas.TurnRow](ctx, st, ref.Key, &ref)
	if err != nil || len(back) != 6 || !strings.Contains(back[2].Observation, "bad \uFFFD") {
		t.Fatalf("turn rows read back: %v %+v", err, back)
	}
}
