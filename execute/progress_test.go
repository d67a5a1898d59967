package execute

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/schemas"
)

// Each line names the phase the run is in, a continued branch's too,
// whose own events hold no synthesis and whose line counts no tasks.
func TestProgressNamesThePhase(t *testing.T) {
	sc := config.Default().Stages
	for _, c := range []struct {
		counts map[string]uint64
		want   string
	}{
		{map[string]uint64{}, "synth ·"},
		{map[string]uint64{schemas.TaskSynthesized: 3, schemas.TaskAudited: 1}, "synth + audit ·"},
		{map[string]uint64{schemas.TaskSynthesized: 3, schemas.PoolSealed: 1}, "rollout (iteration 1/3) ·"},
		{map[string]uint64{schemas.RolloutRequested: 64, schemas.SFTCompleted: 1}, "rollout (iteration 1/3) ·"},
		{map[string]uint64{schemas.RolloutRequested: 64, schemas.BatchReady: 1}, "train (iteration 1/3) ·"},
	} {
		var b bytes.Buffer
		newProgress(&b, sc).update(c.counts, time.Second)
		if !strings.Contains(b.String(), "] "+c.want) {
			t.Errorf("%v: %q, want %q", c.counts, b.String(), c.want)
		}
		// A continued branch synthesises nothing: its pool is its parent's.
		branch := c.counts[schemas.TaskSynthesized] == 0 && c.counts[schemas.RolloutRequested] > 0
		if got := strings.Contains(b.String(), " · tasks "); got == branch {
			t.Errorf("%v: %q: tasks counted %v, want %v", c.counts, b.String(), got, !branch)
		}
	}
}

// A continued branch's line counts the attempts it took over from its
// parent among those requested, and names its phase from its first line:
// re-run at rollout, its scored attempts never outnumber the requested
// ones; re-evaluating at eval, it says so.
func TestProgressOfAContinuedBranch(t *testing.T) {
	sc := config.Default().Stages
	for _, c := range []struct {
		start  *branchStart
		counts map[string]uint64
		want   string
	}{
		{newBranchStart("rollout", engine.BranchResult{Inputs: 128}, 1), map[string]uint64{}, "] rollout (iteration 1/3) · rollouts 0/128 scored (0.0/min) · policy v1 "},
		{newBranchStart("rollout", engine.BranchResult{Inputs: 128}, 1), map[string]uint64{schemas.RewardScored: 372, schemas.RolloutRequested: 256, schemas.BatchReady: 2, schemas.PolicyUpdated: 2},
			"] train (iteration 3/3) · rollouts 372/384 scored (0.0/min) · policy v3 "},
		{newBranchStart("eval", engine.BranchResult{Inputs: 3, Emitted: 576}, 4), map[string]uint64{schemas.RolloutRequested: 576, schemas.RewardScored: 8},
			"] eval · rollouts 8/576 scored (0.0/min) · policy v4 "},
		{newBranchStart("ppo", engine.BranchResult{Inputs: 1}, 1), map[string]uint64{}, "] train (iteration 1/3) · rollouts 0/0 scored"},
		{newBranchStart("sft", engine.BranchResult{Inputs: 1}, 0), map[string]uint64{}, "] sft (fine-tuning on demonstrations) · rollouts 0/0 scored"},
		{newBranchStart("sft", engine.BranchResult{Inputs: 1}, 0), map[string]uint64{schemas.SFTCompleted: 1, schemas.RolloutRequested: 64}, "] rollout (iteration 1/3) · rollouts 0/64 scored (0.0/min) · policy v1 "},
	} {
		var b bytes.Buffer
		p := newProgress(&b, sc)
		p.branch = c.start
		p.update(c.counts, time.Second)
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("branch at %s, %v: %q, want %q", c.start.stage, c.counts, b.String(), c.want)
		}
	}
}
