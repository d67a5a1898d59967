package engine

import (
	"context"
	"fmt"

	"github.com/t1pipe/t1/keys"
)

// BranchResult counts what a branch replay did.
type BranchResult struct {
	Inputs  int // events of the source run handed to the stage
	Emitted int // events published into the branch
	Failed  int // inputs the stage failed permanently (a failed event was published)
}

// Branch re-runs st over the events of run that it consumes, from from,
// as if they had happened in run into: each input is handed to the
// handler with its Run set to into, and what the handler emits is
// published into into, with ids derived from the new run. The source run
// is never written to. Inputs are handled one at a time, in log order; an
// input whose handler fails permanently gets a <type>.failed event in the
// branch and the replay goes on, and any other error stops it (run it
// again: ids are derived, so what was already published is not repeated).
func (l *Log) Branch(ctx context.Context, st Stage, run, into string, from ReplayFrom, configHash string) (BranchResult, error) {
	var res BranchResult
	if err := keys.ValidRun(into); err != nil {
		return res, err
	}
	if into == run {
		return res, fmt.Errorf("engine: branch: the branch must be a new run, not %s itself", run)
	}
	filters := make([]string, len(st.Consumes()))
	for i, t := range st.Consumes() {
		filters[i] = Subject(run, t)
	}
	err := l.Replay(ctx, filters, from, func(ev Event) error {
		res.Inputs++
		in := ev
		in.Run = into
		em := newEmitter(in, configHash)
		err := st.Handle(ctx, in, em)
		if IsPermanent(err) {
			res.Failed++
			f := Failure{Stage: st.Name(), EventID: in.ID, Type: in.Type, Reason: err.Error(), Attempts: 1}
			fe, ferr := em.Emit(FailedType(in.Type), f, WithKey("failed"))
			if ferr != nil {
				return ferr
			}
			return l.publishAll(ctx, []Event{fe})
		}
		if err != nil {
			return fmt.Errorf("engine: branch %s → %s: %s %s: %w", run, into, in.Type, in.ID, err)
		}
		res.Emitted += len(em.out)
		return l.publishAll(ctx, em.out)
	})
	return res, err
}
