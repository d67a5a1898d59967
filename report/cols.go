package report

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/t1pipe/t1/query"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// readObject reads one table object through package query, as `t1
// query` reads it, and calls fn for each row. Rows are read by column name, so a file of another minor version
// (columns added or missing) reads as well; every error names the key.
func readObject(ctx context.Context, st store.ObjectStore, key string, t schemas.Table, fn func(key string, v schemas.Version, c *cols, i int)) error {
	v, tbl, err := query.ObjectAsWritten(ctx, st, t, key, memory.NewGoAllocator())
	if err != nil {
		return err
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 64<<10)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		c := newCols(rec)
		for i := range int(rec.NumRows()) {
			fn(key, v, c, i)
		}
	}
	if err := tr.Err(); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// cols gives a record batch's columns by name; a missing column or a null
// reads as the zero value.
type cols struct {
	names []string
	arrs  map[string]arrow.Array
	// fields holds a struct list column's fields as columns of their own,
	// made on the first row that reads it.
	fields map[string]*cols
}

func newCols(rec arrow.RecordBatch) *cols {
	c := &cols{arrs: map[string]arrow.Array{}}
	for i, f := range rec.Schema().Fields() {
		c.names = append(c.names, f.Name)
		c.arrs[f.Name] = rec.Column(i)
	}
	return c
}

// numeric lists the integer and floating-point columns in file order.
func (c *cols) numeric() []string {
	var out []string
	for _, n := range c.names {
		switch c.arrs[n].(type) {
		case *array.Int8, *array.Int16, *array.Int32, *array.Int64, *array.Uint8, *array.Uint16, *array.Uint32, *array.Uint64,
			*array.Float32, *array.Float64:
			out = append(out, n)
		}
	}
	return out
}

// num returns a numeric column's value, and false when the column is
// missing, not numeric, or null in this row.
func (c *cols) num(name string, i int) (float64, bool) {
	a, ok := c.arrs[name]
	if !ok || a.IsNull(i) {
		return 0, false
	}
	switch a := a.(type) {
	case *array.Int8:
		return float64(a.Value(i)), true
	case *array.Int16:
		return float64(a.Value(i)), true
	case *array.Int32:
		return float64(a.Value(i)), true
	case *array.Int64:
		return float64(a.Value(i)), true
	case *array.Uint8:
		return float64(a.Value(i)), true
	case *array.Uint16:
		return float64(a.Value(i)), true
	case *array.Uint32:
		return float64(a.Value(i)), true
	case *array.Uint64:
		return float64(a.Value(i)), true
	case *array.Float32:
		return float64(a.Value(i)), true
	case *array.Float64:
		return a.Value(i), true
	}
	return 0, false
}

func (c *cols) float(name string, i int) float64 {
	v, _ := c.num(name, i)
	return v
}

func (c *cols) int(name string, i int) int {
	v, _ := c.num(name, i)
	return int(v)
}

func (c *cols) bool(name string, i int) bool {
	a, ok := c.arrs[name].(*array.Boolean)
	return ok && !a.IsNull(i) && a.Value(i)
}

func (c *cols) str(name string, i int) string {
	a, ok := c.arrs[name]
	if !ok || a.IsNull(i) {
		return ""
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return string(a.Value(i))
	case *array.Dictionary:
		if d, ok := a.Dictionary().(*array.String); ok {
			return d.Value(a.GetValueIndex(i))
		}
	}
	return ""
}

// checks reads a list<struct<name, passed>> column: an attempt's verifier
// checks (schemas.Assertion). A missing column or a null reads as none.
func (c *cols) checks(name string, i int) []schemas.Assertion {
	l, ok := c.arrs[name].(*array.List)
	if !ok || l.IsNull(i) {
		return nil
	}
	sub := c.fields[name]
	if sub == nil {
		st, ok := l.ListValues().(*array.Struct)
		if !ok {
			return nil
		}
		sub = &cols{arrs: map[string]arrow.Array{}}
		for f, field := range st.DataType().(*arrow.StructType).Fields() {
			sub.arrs[field.Name] = st.Field(f)
		}
		if c.fields == nil {
			c.fields = map[string]*cols{}
		}
		c.fields[name] = sub
	}
	start, end := l.ValueOffsets(i)
	out := make([]schemas.Assertion, 0, end-start)
	for j := int(start); j < int(end); j++ {
		out = append(out, schemas.Assertion{Name: sub.str("name", j), Passed: sub.bool("passed", j)})
	}
	return out
}
