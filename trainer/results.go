package trainer

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// PolicyFits checks that a policy of shape c can train on a batch sampled
// from a model of dimensions d: its vocabulary covers d's and its routing
// has d's layers, top-k and experts.
func PolicyFits(c moe.Config, d schemas.ModelDims) error {
	if c.Vocab < d.Vocab || c.Layers != d.Layers || c.TopK != d.TopK || c.Experts != d.Experts {
		return fmt.Errorf("vocab %d, %d layers, top-%d of %d experts; the batch was sampled from vocab %d, %d layers, top-%d of %d",
			c.Vocab, c.Layers, c.TopK, c.Experts, d.Vocab, d.Layers, d.TopK, d.Experts)
	}
	return nil
}

// CriticFits checks that a critic of shape c can value a batch sampled
// from a model of dimensions d: its vocabulary covers d's (its own
// routing is its own business).
func CriticFits(c moe.Config, d schemas.ModelDims) error {
	if c.Vocab < d.Vocab {
		return fmt.Errorf("critic vocabulary %d does not cover the policy's %d", c.Vocab, d.Vocab)
	}
	return nil
}

// Adopt makes the checkpoint a trainer reported — an object-store prefix,
// or an absolute local directory an external trainer wrote — the one at
// prefix: it checks that it loads and that fits (when not nil) accepts
// its shape, and stores it under prefix when it is elsewhere. A
// checkpoint of an external architecture is checked without loading
// (adoptExternal) and stored file by file. A checkpoint that is missing,
// does not load or does not fit is a BadInputError.
func Adopt(ctx context.Context, st store.ObjectStore, where, prefix string, fits func(moe.Config) error) error {
	c, modelType, external, err := externalShape(ctx, st, where)
	if err != nil {
		return err
	}
	if external {
		return adoptExternal(ctx, st, where, prefix, c, modelType, fits)
	}
	var ck *moe.Checkpoint
	if filepath.IsAbs(where) {
		if _, serr := os.Stat(where); serr != nil {
			return Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, serr))
		}
		if ck, err = moe.LoadDir(where); err != nil {
			err = Bad(fmt.Errorf("the trainer's checkpoint %s does not load: %w", where, err))
		}
	} else {
		ck, err = LoadCheckpoint(ctx, st, where)
	}
	if err != nil {
		return err
	}
	if fits != nil {
		if err := fits(ck.Model.Cfg); err != nil {
			return Bad(fmt.Errorf("the trainer's checkpoint %s has %w", where, err))
		}
	}
	if where == prefix {
		return nil
	}
	if err := ck.Save(ctx, st, prefix); err != nil {
		return fmt.Errorf("store the trainer's checkpoint at %s: %w", prefix, err)
	}
	return nil
}

// LatestCritic returns the newest critic version at most maxVersion of a
// run whose lineage is runs (the run, then its ancestors), and its prefix:
// of equal versions the nearest run's, so a branch's own critic comes
// before its parent's. prefix is "" (and version 0) when there is none,
// so the critic starts fresh. A critic is found by its weights as stored
// last: model.safetensors, or an external model's shard index.
func LatestCritic(ctx context.Context, st store.ObjectStore, runs []string, maxVersion int64) (int64, string, error) {
	best, prefix := int64(-1), ""
	for _, run := range runs {
		base := keys.Critics(run)
		for info, err := range st.List(ctx, base) {
			if err != nil {
				return 0, "", fmt.Errorf("list critics: %w", err)
			}
			dir, file, ok := strings.Cut(strings.TrimPrefix(info.Key, base), "/")
			if !ok || (file != moe.WeightsFile && file != moe.WeightsIndexFile) || !strings.HasPrefix(dir, "v") {
				continue
			}
			v, err := strconv.ParseInt(dir[1:], 10, 64)
			if err == nil && v <= maxVersion && v > best {
				best, prefix = v, keys.Critic(run, v)
			}
		}
	}
	if best < 0 {
		return 0, "", nil
	}
	return best, prefix, nil
}

// ValueRows turns a critic's per-chunk figures into the values table's
// rows for batch b, in the batch's chunk order, stamped with the batch's
// run, iteration and policy version and the version of the critic that
// computed them. Figures that miss a chunk, repeat one, name one the
// batch lacks, have a length other than the chunk's or are not finite
// are a BadInputError.
func ValueRows(b *Batch, vals []ChunkValues, criticVersion int64) ([]schemas.ValueRow, error) {
	byKey := map[chunkKey]*ChunkValues{}
	for i := range vals {
		v := &vals[i]
		k := chunkKey{v.TaskID, v.Attempt, v.Chunk}
		if byKey[k] != nil {
			return nil, Bad(fmt.Errorf("values: task %s attempt %d chunk %d appears twice", v.TaskID, v.Attempt, v.Chunk))
		}
		byKey[k] = v
	}
	m := b.Manifest
	var rows []schemas.ValueRow
	for _, c := range b.Chunks() {
		t := c.Tokens
		v := byKey[chunkKey{t.TaskID, t.Attempt, t.Chunk}]
		if v == nil {
			return nil, Bad(fmt.Errorf("values: task %s attempt %d chunk %d missing", t.TaskID, t.Attempt, t.Chunk))
		}
		n := len(t.TokenIDs)
		if len(v.Values) != n || len(v.Advantages) != n || len(v.Returns) != n {
			return nil, Bad(fmt.Errorf("values of task %s attempt %d chunk %d: %d values, %d advantages, %d returns for %d tokens",
				t.TaskID, t.Attempt, t.Chunk, len(v.Values), len(v.Advantages), len(v.Returns), n))
		}
		for _, s := range [][]float32{v.Values, v.Advantages, v.Returns} {
			for _, x := range s {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					return nil, Bad(fmt.Errorf("values of task %s attempt %d chunk %d: %v", t.TaskID, t.Attempt, t.Chunk, x))
				}
			}
		}
		delete(byKey, chunkKey{t.TaskID, t.Attempt, t.Chunk})
		rows = append(rows, schemas.ValueRow{Run: m.Run, TaskID: t.TaskID, Attempt: t.Attempt, Chunk: t.Chunk, Iteration: int32(m.Iteration),
			PolicyVersion: m.PolicyVersion, CriticVersion: criticVersion, Values: v.Values, Advantages: v.Advantages, Returns: v.Returns})
	}
	for k := range byKey {
		return nil, Bad(fmt.Errorf("values hold task %s attempt %d chunk %d, which the batch lacks", k.task, k.attempt, k.chunk))
	}
	return rows, nil
}

// TrainingReport is the trainer's full account of one actor update,
// stored (as JSON) at keys.TrainingReport once the new policy and its
// metrics row are stored; it marks the update as done.
type TrainingReport struct {
	Metrics ActorMetrics `json:"metrics"`
	// Event is the policy.updated payload the update announced.
	Event schemas.PolicyUpdatedPayload `json:"event"`
}

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
