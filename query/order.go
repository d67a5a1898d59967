package query

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// sortRows is the rows of recs as one record batch, stably sorted by the
// keys order names (nulls first ascending, last descending).
func sortRows(ctx context.Context, recs []arrow.RecordBatch, order []Order, mem memory.Allocator) (arrow.RecordBatch, error) {
	sch := recs[0].Schema()
	for _, r := range recs[1:] {
		if !sch.Equal(r.Schema()) {
			return nil, fmt.Errorf("query: objects of this table have different schemas (%s vs %s); select common columns with --select", sch, r.Schema())
		}
	}
	cols := make([]arrow.Array, sch.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		parts := make([]arrow.Array, len(recs))
		for j, r := range recs {
			parts[j] = r.Column(i)
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("query: %s: %w", sch.Field(i).Name, err)
		}
		cols[i] = c
	}
	n := 0
	if len(cols) > 0 {
		n = cols[0].Len()
	}
	type key struct {
		arr  arrow.Array
		desc bool
	}
	var keys []key
	for _, k := range order {
		if idx := sch.FieldIndices(k.Column); len(idx) > 0 {
			keys = append(keys, key{cols[idx[0]], k.Desc})
		}
	}
	rows := make([]int64, n)
	for i := range rows {
		rows[i] = int64(i)
	}
	slices.SortStableFunc(rows, func(a, b int64) int {
		for _, k := range keys {
			if c := compareAt(k.arr, int(a), int(b)); c != 0 {
				if k.desc {
					return -c
				}
				return c
			}
		}
		return 0
	})
	b := array.NewInt64Builder(mem)
	defer b.Release()
	b.AppendValues(rows, nil)
	idx := b.NewArray()
	defer idx.Release()
	sorted := make([]arrow.Array, len(cols))
	for i, c := range cols {
		t, err := compute.TakeArray(ctx, c, idx)
		if err != nil {
			for _, s := range sorted[:i] {
				s.Release()
			}
			return nil, fmt.Errorf("query: order %s: %w", sch.Field(i).Name, err)
		}
		sorted[i] = t
	}
	out := array.NewRecordBatch(sch, sorted, int64(n))
	for _, s := range sorted {
		s.Release()
	}
	return out, nil
}

// compareAt compares two values of an ordering column: numbers by value,
// strings and booleans as themselves, and any other by its text.
func compareAt(arr arrow.Array, i, j int) int {
	ni, nj := arr.IsNull(i), arr.IsNull(j)
	switch {
	case ni || nj:
		return cmp.Compare(boolInt(!ni), boolInt(!nj))
	}
	switch a := arr.(type) {
	case *array.String:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Int32:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Int64:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Uint32:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Uint64:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Float64:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Float32:
		return cmp.Compare(a.Value(i), a.Value(j))
	case *array.Boolean:
		return cmp.Compare(boolInt(a.Value(i)), boolInt(a.Value(j)))
	}
	return cmp.Compare(arr.ValueStr(i), arr.ValueStr(j))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
