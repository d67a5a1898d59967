package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/t1pipe/t1/keys"
)

// BranchResult counts what a branch replay did.
type BranchResult struct {
	Inputs  int // events of the source run handed to the stage
	Emitted int // events published into the branch
	Failed  int // inputs the stage failed permanently (a failed event was published)
}

// Branch re-runs st over the events of run that it consumes, from from,
// as if they had happened in run into (BranchEvents); keep, when not nil,
// picks the inputs to hand over.
func (l *Log) Branch(ctx context.Context, st Stage, run, into string, from ReplayFrom, configHash string, keep func(Event) bool) (BranchResult, error) {
	if err := checkBranch(run, into); err != nil {
		return BranchResult{}, err
	}
	filters := make([]string, len(st.Consumes()))
	for i, t := range st.Consumes() {
		filters[i] = Subject(run, t)
	}
	var inputs []Event
	err := l.Replay(ctx, filters, from, func(ev Event) error {
		if keep == nil || keep(ev) {
			inputs = append(inputs, ev)
		}
		return nil
	})
	if err != nil {
		return BranchResult{}, err
	}
	return l.BranchEvents(ctx, st, inputs, into, configHash)
}

// BranchEvents hands each of inputs (events of other runs) to st's
// handler with its Run set to into, and publishes what the handler emits
// into into, with ids derived from the new run. No input's own run is
// written to. Inputs are handled one at a time, in order; an input whose
// handler fails permanently gets a <type>.failed event in the branch and
// the replay goes on, and any other error stops it (run it again: ids are
// derived, so what was already published is not repeated).
func (l *Log) BranchEvents(ctx context.Context, st Stage, inputs []Event, into, configHash string) (BranchResult, error) {
	var res BranchResult
	if err := keys.ValidRun(into); err != nil {
		return res, err
	}
	for _, ev := range inputs {
		if ev.Run == into {
			return res, fmt.Errorf("engine: branch: input %s is of the branch %s itself", ev.ID, into)
		}
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
				return res, ferr
			}
			if err := l.publishAll(ctx, []Event{fe}); err != nil {
				return res, err
			}
			continue
		}
		if err != nil {
			return res, fmt.Errorf("engine: branch %s → %s: %s %s: %w", ev.Run, into, in.Type, in.ID, err)
		}
		res.Emitted += len(em.out)
		if err := l.publishAll(ctx, em.out); err != nil {
			return res, err
		}
	}
	return res, nil
}

func checkBranch(run, into string) error {
	if err := keys.ValidRun(into); err != nil {
		return err
	}
	if into == run {
		return fmt.Errorf("engine: branch: the branch must be a new run, not %s itself", run)
	}
	return nil
}

// RunStartedType is the type of the event that opens a run. A branch's
// names the run it was replayed from in its payload's "parent" field
// (schemas.RunStartedPayload), which is all Lineage reads of it.
const RunStartedType = "run.started"

// maxLineage bounds the ancestors Lineage follows.
const maxLineage = 32

// Lineage is run followed by its ancestors, nearest first: the parent its
// run.started names, that run's parent, and so on. A run without
// run.started, or whose run.started names no parent, is its own whole
// lineage. Artifacts a branch did not make itself are found under its
// ancestors' keys, in this order (ARCHITECTURE.md §5, Replay). A lineage
// that loops or runs deeper than 32 runs is an error.
func (l *Log) Lineage(ctx context.Context, run string) ([]string, error) {
	if err := keys.ValidRun(run); err != nil {
		return nil, Permanent(fmt.Errorf("engine: lineage: %w", err))
	}
	out := []string{run}
	for {
		parent, err := l.parent(ctx, out[len(out)-1])
		if err != nil {
			return nil, err
		}
		if parent == "" {
			return out, nil
		}
		if slices.Contains(out, parent) || len(out) == maxLineage {
			return nil, Permanent(fmt.Errorf("engine: lineage of %s: %v then %s: a loop or deeper than %d runs", run, out, parent, maxLineage))
		}
		out = append(out, parent)
	}
}

func (l *Log) parent(ctx context.Context, run string) (string, error) {
	ev, ok, err := l.StartEvent(ctx, run)
	if err != nil || !ok {
		return "", err
	}
	var p struct {
		Parent string `json:"parent"`
	}
	if len(ev.Payload) > 0 {
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return "", Permanent(fmt.Errorf("engine: lineage: run.started of %s: %w", run, err))
		}
	}
	if p.Parent != "" {
		if err := keys.ValidRun(p.Parent); err != nil {
			return "", Permanent(fmt.Errorf("engine: lineage: run.started of %s names parent %w", run, err))
		}
	}
	return p.Parent, nil
}

// StartEvent is run's run.started, looked up by subject (one request, not
// a replay); ok is false when the run has none.
func (l *Log) StartEvent(ctx context.Context, run string) (ev Event, ok bool, err error) {
	if err := keys.ValidRun(run); err != nil {
		return Event{}, false, Permanent(fmt.Errorf("engine: %w", err))
	}
	subject := Subject(run, RunStartedType)
	msg, err := l.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Event{}, false, nil
	}
	if err != nil {
		return Event{}, false, fmt.Errorf("engine: look up %s: %w", subject, err)
	}
	ev, err = ParseMessage(msg.Subject, msg.Header, msg.Data, msg.Sequence)
	if err != nil {
		return Event{}, false, Permanent(fmt.Errorf("engine: %s: %w", subject, err))
	}
	return ev, true, nil
}
