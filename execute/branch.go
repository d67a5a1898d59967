package execute

import (
	"context"
	"fmt"
	"io"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/lineage"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/schemas"
)

// Replay is what `t1 replay` did: the stage it replayed into the branch,
// and with --continue how the branch ended.
type Replay struct {
	engine.BranchResult
	Stage  string   `json:"stage"`
	Run    string   `json:"run"`
	Into   string   `json:"into"`
	Branch *Summary `json:"branch,omitempty"` // with --continue: how the branch ended
}

// WriteText prints the replay of the branch point.
func (s Replay) WriteText(w io.Writer) {
	fmt.Fprintf(w, "stage %s: %d events of %s replayed into %s: %d emitted, %d failed\n",
		s.Stage, s.Inputs, s.Run, s.Into, s.Emitted, s.Failed)
}

// ReplayStage re-runs o.Stage of o.Parent over its past inputs into the
// branch o.Into, and nothing after it.
func ReplayStage(ctx context.Context, in *local.Infra, o pipeline.BranchOptions) (Replay, error) {
	out := Replay{Stage: o.Stage, Run: o.Parent, Into: o.Into}
	p, err := pipeline.Build(in.Config, in.Log, in.Store, pipeline.WithWorkDir(in.WorkDir))
	if err == nil {
		out.BranchResult, err = p.Branch(ctx, in.Log, o)
	}
	return out, err
}

// Continue branches o.Parent into o.Into at o.Stage (o.Continue) and runs
// the branch to its end in this process, on in's servers, with in's
// configuration; it reports the branch point's replay on w. A nil Branch
// in the result means the run was stopped.
func Continue(ctx context.Context, w io.Writer, in *local.Infra, o pipeline.BranchOptions, at Stages) (Replay, error) {
	out := Replay{Stage: o.Stage, Run: o.Parent, Into: o.Into}
	p, err := pipeline.Build(in.Config, in.Log, in.Store, pipeline.WithWorkDir(in.WorkDir))
	if err != nil {
		return out, err
	}
	if out.BranchResult, err = p.Branch(ctx, in.Log, o); err != nil {
		return out, err
	}
	out.WriteText(w)
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
	out.Branch, err = follow(ctx, w, &bin, at, newBranchStart(o.Stage, out.BranchResult, version))
	return out, err
}
