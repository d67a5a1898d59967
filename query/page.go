package query

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// Damage is an object a tolerant read left out, and why.
type Damage struct {
	Key string `json:"key"`
	Err string `json:"error"`
}

// Order is one sort key of a page.
type Order struct {
	Column string
	Desc   bool
}

// PageOptions asks for one page of a table's rows, as a viewer shows
// them: a screenful, in an order the viewer chose, of the columns it
// shows.
type PageOptions struct {
	Run string
	// Where keeps the rows it holds for; nil keeps every row.
	Where Expr
	// Select names the columns returned, in order (empty: all).
	Select []string
	// Order sorts the rows before the table's own order (run, iteration,
	// task, attempt, chunk), which breaks its ties.
	Order []Order
	// Offset rows are skipped, then Limit returned (0: all).
	Offset, Limit int64
	// Partition, when set, reads only that partition's objects (an
	// iteration, or a round): what one attempt's rows need.
	Partition *int
	// Tolerate reads on past an object that does not read, naming it in
	// Page.Damaged, so that one damaged object hides only its own rows.
	Tolerate bool
}

// Page is the rows a PageOptions asked for.
type Page struct {
	// Rows holds the page's rows; nil when there are none.
	Rows arrow.RecordBatch
	// Total is how many rows matched, before Offset and Limit.
	Total   int64
	Damaged []Damage
}

// Release frees the page's rows.
func (p *Page) Release() {
	if p != nil && p.Rows != nil {
		p.Rows.Release()
		p.Rows = nil
	}
}

// ReadPage is one page of tbl's rows in o.Run, read as Run reads them
// (the same objects, conformed to the current schema, filtered with the
// same expressions) and reading only the columns it selects, filters or
// orders by. An unknown column is a usage error naming the table's.
func ReadPage(ctx context.Context, st store.ObjectStore, tbl schemas.Table, o PageOptions) (*Page, error) {
	cols, err := tableColumns(tbl)
	if err != nil {
		return nil, err
	}
	if err := checkPage(tbl.Name, cols, o); err != nil {
		return nil, err
	}
	order := orderOf(tbl, cols)
	var read []string
	if len(o.Select) > 0 {
		read = pageColumns(o, order)
	}
	mem := memory.NewGoAllocator()
	kept, damaged, err := collect(ctx, st, tbl, o.Run, read, o.Where, source{partition: o.Partition, tolerate: o.Tolerate}, mem)
	defer release(kept)
	if err != nil {
		return nil, err
	}
	p, err := pageOf(ctx, kept, order, o, mem)
	if p != nil {
		p.Damaged = damaged
	}
	return p, err
}

// checkPage refuses a column of o that the table does not have.
func checkPage(table string, cols []string, o PageOptions) error {
	if err := checkColumnsOf(table, cols, o.Where, o.Select); err != nil {
		return err
	}
	for _, k := range o.Order {
		if err := known.Name("column", "columns of "+table, k.Column, cols); err != nil {
			return fmt.Errorf("order: %w", err)
		}
	}
	if o.Offset < 0 || o.Limit < 0 {
		return fmt.Errorf("query: offset %d and limit %d must not be negative", o.Offset, o.Limit)
	}
	return nil
}

// pageColumns are the columns a page reads: those it returns, filters
// and orders by.
func pageColumns(o PageOptions, order []string) []string {
	var read []string
	add := func(c string) {
		if !slices.Contains(read, c) {
			read = append(read, c)
		}
	}
	for _, c := range o.Select {
		add(c)
	}
	if o.Where != nil {
		o.Where.columns(add)
	}
	for _, k := range o.Order {
		add(k.Column)
	}
	for _, c := range order {
		add(c)
	}
	return read
}

// pageOf sorts the kept rows by o.Order then order, cuts the page and
// projects o.Select.
func pageOf(ctx context.Context, kept []arrow.RecordBatch, order []string, o PageOptions, mem memory.Allocator) (*Page, error) {
	var nonEmpty []arrow.RecordBatch
	for _, r := range kept {
		if r.NumRows() > 0 {
			nonEmpty = append(nonEmpty, r)
		}
	}
	if len(nonEmpty) == 0 {
		return &Page{}, nil
	}
	keys := slices.Clone(o.Order)
	for _, c := range order {
		keys = append(keys, Order{Column: c})
	}
	rec, err := sortRows(ctx, nonEmpty, keys, mem)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	p := &Page{Total: rec.NumRows()}
	lo := min(o.Offset, p.Total)
	hi := p.Total
	if o.Limit > 0 {
		hi = min(lo+o.Limit, p.Total)
	}
	if lo == hi {
		return p, nil
	}
	cut := rec.NewSlice(lo, hi)
	defer cut.Release()
	if p.Rows, err = filterProject(ctx, cut, nil, o.Select); err != nil {
		return nil, err
	}
	return p, nil
}

// checkColumnsOf is checkColumns of a table known by name and columns.
func checkColumnsOf(table string, cols []string, where Expr, sel []string) error {
	return checkColumns(schemas.Table{Name: table}, cols, where, sel)
}

// AttemptColumns are the columns of the attempts view, in order: the
// trajectories row of each attempt, with its rewards row's verdict.
var AttemptColumns = []string{"iteration", "purpose", "suite", "policy_version", "task_id", "attempt",
	"turns", "tokens", "termination", "duration_ms", "reward", "passed", "total"}

var (
	attemptKeys    = []string{"iteration", "purpose", "policy_version", "task_id", "attempt"}
	attemptOrder   = []string{"iteration", "policy_version", "purpose", "task_id", "attempt"}
	trajectoryCols = AttemptColumns[:10]
	verdictCols    = []string{"reward", "passed", "total"}
)

// ReadAttempts is one page of a run's attempts: each trajectories row
// joined with the rewards row of the same attempt (reward, passed,
// total; null until it is scored), filtered, ordered and cut as
// ReadPage does, over AttemptColumns. An attempt is its iteration,
// purpose, policy version, task and attempt number.
func ReadAttempts(ctx context.Context, st store.ObjectStore, o PageOptions) (*Page, error) {
	if err := checkPage("attempts", AttemptColumns, o); err != nil {
		return nil, err
	}
	mem := memory.NewGoAllocator()
	src := source{partition: o.Partition, tolerate: o.Tolerate}
	trajs, damaged, err := collect(ctx, st, schemas.TrajectoriesTable, o.Run, trajectoryCols, nil, src, mem)
	defer release(trajs)
	if err != nil {
		return nil, err
	}
	verdicts, bad, err := collect(ctx, st, schemas.RewardsTable, o.Run, append(slices.Clone(attemptKeys), verdictCols...), nil, src, mem)
	defer release(verdicts)
	damaged = append(damaged, bad...)
	if err != nil {
		return nil, err
	}
	joined, err := joinVerdicts(trajs, verdicts, mem)
	if err != nil {
		return nil, err
	}
	defer release(joined)
	if o.Where != nil {
		for i, r := range joined {
			f, err := filterProject(ctx, r, o.Where, nil)
			if err != nil {
				return nil, err
			}
			r.Release()
			joined[i] = f
		}
	}
	p, err := pageOf(ctx, joined, attemptOrder, o, mem)
	if p != nil {
		p.Damaged = damaged
	}
	return p, err
}

type attemptKey struct {
	iteration int64
	purpose   string
	version   int64
	task      string
	attempt   int64
}

// keyAt is the attempt of row i of rec, which holds attemptKeys.
func keyAt(rec arrow.RecordBatch, i int) attemptKey {
	col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
	return attemptKey{intAt(col("iteration"), i), col("purpose").(*array.String).Value(i), intAt(col("policy_version"), i),
		col("task_id").(*array.String).Value(i), intAt(col("attempt"), i)}
}

func intAt(a arrow.Array, i int) int64 {
	switch a := a.(type) {
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	}
	return 0
}

// joinVerdicts appends reward, passed and total to each trajectories
// batch, from the rewards row of the same attempt.
func joinVerdicts(trajs, verdicts []arrow.RecordBatch, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	type verdict struct {
		reward        float64
		passed, total int32
		null          [3]bool
	}
	byKey := map[attemptKey]verdict{}
	for _, r := range verdicts {
		rw := r.Column(r.Schema().FieldIndices("reward")[0])
		ps := r.Column(r.Schema().FieldIndices("passed")[0])
		tt := r.Column(r.Schema().FieldIndices("total")[0])
		for i := range int(r.NumRows()) {
			v := verdict{null: [3]bool{rw.IsNull(i), ps.IsNull(i), tt.IsNull(i)}}
			if !v.null[0] {
				v.reward = rw.(*array.Float64).Value(i)
			}
			v.passed, v.total = int32(intAt(ps, i)), int32(intAt(tt, i))
			byKey[keyAt(r, i)] = v
		}
	}
	var out []arrow.RecordBatch
	for _, r := range trajs {
		rb, pb, tb := array.NewFloat64Builder(mem), array.NewInt32Builder(mem), array.NewInt32Builder(mem)
		for i := range int(r.NumRows()) {
			v, ok := byKey[keyAt(r, i)]
			switch {
			case !ok || v.null[0]:
				rb.AppendNull()
			default:
				rb.Append(v.reward)
			}
			for j, b := range []*array.Int32Builder{pb, tb} {
				switch {
				case !ok || v.null[1+j]:
					b.AppendNull()
				default:
					b.Append([]int32{v.passed, v.total}[j])
				}
			}
		}
		fields := append(slices.Clone(r.Schema().Fields()),
			arrow.Field{Name: "reward", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
			arrow.Field{Name: "passed", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "total", Type: arrow.PrimitiveTypes.Int32, Nullable: true})
		cols := append(slices.Clone(r.Columns()), rb.NewArray(), pb.NewArray(), tb.NewArray())
		out = append(out, array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, r.NumRows()))
		for _, c := range cols[len(cols)-3:] {
			c.Release()
		}
		rb.Release()
		pb.Release()
		tb.Release()
	}
	return out, nil
}
