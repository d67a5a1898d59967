package reward

import (
	"bytes"
	"context"
	"testing"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

// With unfinished: zero a training attempt that solved its task but ran
// out of turns earns nothing, while one that declared completion earns
// its reward and an evaluation attempt is scored as its verifier says;
// what the verifier reported stays in every case. With score, the
// default, the unfinished attempt earns its reward.
func TestUnfinishedTrainingAttemptsEarnNothing(t *testing.T) {
	ctx := context.Background()
	bw := testinfra.Bubblewrap(t)
	tk, snap, ref := solvedGreet(t, bw)
	st := testinfra.Store(t)
	if _, _, _, err := trial.PutBundle(ctx, st, "rw", "greet", tk); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, ref.Key, bytes.NewReader(snap), ref.Bytes, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	attempt := func(n int, purpose, end string) schemas.RolloutCompletedPayload {
		return schemas.RolloutCompletedPayload{TaskID: "greet", Attempt: n, Purpose: purpose, Termination: end, Snapshot: ref}
	}
	attempts := []schemas.RolloutCompletedPayload{
		attempt(0, schemas.PurposeTrain, agent.EndMaxTurns),
		attempt(1, schemas.PurposeTrain, agent.EndComplete),
		attempt(2, schemas.PurposeEval, agent.EndMaxTurns),
	}
	for _, c := range []struct {
		unfinished string
		want       []float64
	}{
		{UnfinishedZero, []float64{0, 1, 1}},
		{UnfinishedScore, []float64{1, 1, 1}},
	} {
		s, err := New(Config{Store: st, Trial: trial.Options{Backend: bw},
			Settings: Settings{Mode: verifier.ModeCount, Scale: 1, Unfinished: c.unfinished}, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range attempts {
			out := testinfra.Feed(t, s, testinfra.RootEvent(t, "rw", schemas.RolloutCompleted, c.unfinished+p.Purpose+p.Termination, p))
			var sc schemas.RewardScoredPayload
			if len(out) != 1 || out[0].Decode(&sc) != nil {
				t.Fatalf("%s: attempt %d emitted %v", c.unfinished, i, out)
			}
			// The task's test reports no assertions: its outcome is the
			// verifier's, binary, and stays so whatever the reward.
			if sc.Reward != c.want[i] || !sc.Fallback || sc.Passed != 0 || sc.Total != 0 {
				t.Errorf("unfinished %s, %s attempt ending %s: reward %g, fallback %v, passed %d of %d; want reward %g, the binary outcome",
					c.unfinished, p.Purpose, p.Termination, sc.Reward, sc.Fallback, sc.Passed, sc.Total, c.want[i])
			}
		}
	}
}
