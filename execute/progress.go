package execute

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/schemas"
)

type progress struct {
	w     io.Writer
	sc    config.Stages
	tty   bool
	last  time.Time
	stage string // of the last line
	// branch is where a continued branch left its parent (nil: a run of
	// its own).
	branch *branchStart
	// scored0 is the rewards already scored when this command began
	// watching: a resumed run's rate counts only what it scored since.
	scored0 *uint64
}

func newProgress(w io.Writer, sc config.Stages) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: w, sc: sc, tty: tty}
}

// branchStart is what a continued branch's progress needs of its start:
// the stage it re-ran, how many of its attempts were its parent's
// requests (re-run at rollout or re-scored at reward), which its own
// rollout.requested events do not count, and the latest policy version
// it took over, which its own sft.completed and policy.updated events
// count on from.
type branchStart struct {
	stage     string
	inherited uint64
	version   int64
}

func newBranchStart(stage string, res engine.BranchResult, version int64) *branchStart {
	b := &branchStart{stage: stage, version: version}
	if stage == "rollout" || stage == "reward" {
		b.inherited = uint64(res.Inputs)
	}
	return b
}

func (p *progress) update(c map[string]uint64, elapsed time.Duration) {
	stage := "synth"
	requested := c[schemas.RolloutRequested]
	// Every fine-tuning and every update, a skipped one too, makes a version.
	version := int64(c[schemas.SFTCompleted] + c[schemas.PolicyUpdated])
	if p.branch != nil {
		requested += p.branch.inherited
		version += p.branch.version
	}
	switch {
	case c[schemas.RunCompleted]+c[schemas.RunFailed] > 0:
		stage = "done"
	case c[schemas.PolicyUpdated] > 0 || c[schemas.BatchReady] > 0:
		stage = fmt.Sprintf("train (iteration %d/%d)", min(int(c[schemas.PolicyUpdated])+1, p.sc.Control.Iterations), p.sc.Control.Iterations)
	case c[schemas.SFTRequested] > c[schemas.SFTCompleted]:
		stage = "sft (fine-tuning on demonstrations)"
	case c[schemas.PoolSealed] > 0 && c[schemas.RolloutRequested] > 0 && c[schemas.SFTRequested] == 0 && p.sc.Control.SFTSteps > 0:
		stage = "sft (playing demonstrations)"
	case c[schemas.PoolSealed] > 0:
		stage = fmt.Sprintf("rollout (iteration 1/%d)", p.sc.Control.Iterations)
	case c[schemas.TaskAudited] > 0:
		stage = "synth + audit"
	case p.branch != nil && p.branch.stage == "eval":
		// Re-evaluating the parent's policies before any training.
		stage = "eval"
	case p.branch != nil && p.branch.stage == "sft" && c[schemas.SFTCompleted] == 0:
		stage = "sft (fine-tuning on demonstrations)"
	case p.branch != nil && (p.branch.stage == "critic" || p.branch.stage == "ppo"):
		stage = fmt.Sprintf("train (iteration 1/%d)", p.sc.Control.Iterations)
	case p.branch != nil || (c[schemas.TaskSynthesized] == 0 && c[schemas.RolloutRequested] > 0):
		// A continued branch: its pool and fine-tuning are its parent's.
		stage = fmt.Sprintf("rollout (iteration 1/%d)", p.sc.Control.Iterations)
	}
	// Logs and CI get a line every few seconds and one at each change of
	// stage, terminals a live line.
	if !p.tty && time.Since(p.last) < 5*time.Second && stage == p.stage {
		return
	}
	p.last, p.stage = time.Now(), stage
	if p.scored0 == nil {
		n := c[schemas.RewardScored]
		p.scored0 = &n
	}
	rate := 0.0
	if elapsed >= time.Second {
		rate = float64(c[schemas.RewardScored]-*p.scored0) / elapsed.Minutes()
	}
	tasks := fmt.Sprintf(" · tasks %d synthesised, %d discarded, %d audited", c[schemas.TaskSynthesized], c[schemas.SynthDiscarded], c[schemas.TaskAudited])
	if c[schemas.TaskSynthesized]+c[schemas.SynthDiscarded]+c[schemas.TaskAudited] == 0 && (p.branch != nil || requested > 0) {
		tasks = "" // a continued branch's pool is its parent's
	}
	line := fmt.Sprintf("[%s] %s%s · rollouts %d/%d scored (%.1f/min) · policy v%d · evals %d · %d failed",
		elapsed.Round(time.Second), stage, tasks,
		c[schemas.RewardScored], requested, rate, version, c[schemas.EvalCompleted], FailedTotal(c))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progress) finish() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
