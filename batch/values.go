package batch

import (
	"fmt"
	"math"

	"github.com/t1pipe/t1/schemas"
)

// ChunkValues are the critic's figures for one chunk, one entry per
// token, aligned as package rl describes (0 at every non-action token).
type ChunkValues struct {
	TaskID     string    `json:"task_id"`
	Attempt    int32     `json:"attempt"`
	Chunk      int32     `json:"chunk"`
	Values     []float32 `json:"values"`
	Advantages []float32 `json:"advantages"`
	Returns    []float32 `json:"returns"`
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
