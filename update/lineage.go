package update

import (
	"context"
	"fmt"
)

// Lineage returns a run's lineage: the run, then the runs it branched
// from, nearest first (engine.Log.Lineage). Stages resolve the
// checkpoints a run reads through it and write under the run's own keys.
type Lineage func(ctx context.Context, run string) ([]string, error)

// Of is run's lineage; a nil Lineage knows no branches, so every run is
// its own whole lineage.
func (f Lineage) Of(ctx context.Context, run string) ([]string, error) {
	if f == nil {
		return []string{run}, nil
	}
	runs, err := f(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("lineage of %s: %w", run, err)
	}
	if len(runs) == 0 || runs[0] != run {
		return nil, fmt.Errorf("lineage of %s: %v does not start at the run", run, runs)
	}
	return runs, nil
}
