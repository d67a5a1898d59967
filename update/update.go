package update

import (
	"context"
	"fmt"
	"slices"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// Stage returns the update stage name, which answers every event of type
// in with one event of type out: it decodes the event's payload, runs do
// for the event's run, and emits what do returns keyed by key(payload).
// An error of do that batch classifies as bad input fails the event
// (engine.Permanent); any other is returned, and the event redelivered.
func Stage[P, R any](name, in, out string, key func(P) string, do func(ctx context.Context, run string, p P) (*R, error)) engine.Stage {
	return engine.NewStage(name, []string{in}, func(ctx context.Context, ev engine.Event, em engine.Emitter) error {
		var p P
		if err := ev.Decode(&p); err != nil {
			return err
		}
		res, err := do(ctx, ev.Run, p)
		if batch.IsBad(err) {
			return engine.Permanent(err)
		}
		if err != nil {
			return err
		}
		_, err = em.Emit(out, res, engine.WithKey(key(p)))
		return err
	})
}

// Claim is what an event says of the batch it hands an update.
type Claim struct {
	// Event is the event's type; it prefixes the errors.
	Event     string
	Manifest  schemas.ObjectRef
	Iteration int
	// PolicyVersion, when not nil, must be the manifest's policy version.
	PolicyVersion *int64
}

// Input is the batch an update trains on: its manifest, made the run's
// own, and the run's lineage.
type Input struct {
	Manifest *schemas.BatchManifest
	Runs     []string
}

// Read reads the manifest c names and checks that it is a batch of run's
// lineage at the iteration (and policy version) c claims. A branch
// re-running its parent's update is handed the parent's batch: the
// manifest returned is a copy that names run, so that everything the
// update writes goes under the branch's keys. A manifest that is
// missing, does not match its claim check or is not the batch claimed is
// a batch.BadInputError; a store or lineage that cannot be read is
// returned as is.
func Read(ctx context.Context, st store.ObjectStore, lineage Lineage, run string, c Claim) (*Input, error) {
	m, err := batch.ReadManifest(ctx, st, c.Manifest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Event, err)
	}
	runs, err := lineage.Of(ctx, run)
	if err != nil {
		return nil, err
	}
	ok := slices.Contains(runs, m.Run) && m.Iteration == c.Iteration
	got, want := fmt.Sprintf("iteration %d", m.Iteration), fmt.Sprintf("iteration %d", c.Iteration)
	if v := c.PolicyVersion; v != nil {
		ok = ok && m.PolicyVersion == *v
		got, want = fmt.Sprintf("%s policy %d", got, m.PolicyVersion), fmt.Sprintf("%s policy %d", want, *v)
	}
	if !ok {
		return nil, batch.Bad(fmt.Errorf("%s: manifest %s is for run %s %s, the event for run %s (lineage %v) %s",
			c.Event, c.Manifest.Key, m.Run, got, run, runs, want))
	}
	own := *m
	own.Run = run
	return &Input{Manifest: &own, Runs: runs}, nil
}
