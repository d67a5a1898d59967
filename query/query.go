package query

import (
	"context"
	"encoding/base64"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/jsonout"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/columnar"
	"github.com/t1pipe/t1/store"
)

// Options is one query of a run's table.
type Options struct {
	Run string
	// Where keeps the rows it holds for; nil keeps every row.
	Where Expr
	// Select names the columns printed, in order (empty: all).
	Select []string
	// Limit bounds the rows printed (0: all).
	Limit int64
	// Format is one of Formats.
	Format string
}

// Formats are the output formats a query writes: json is one JSON array
// of row objects, ndjson one object per line.
var Formats = []string{"table", "csv", "json", "ndjson", "arrow"}

// checkFormat refuses a format a query cannot write.
func checkFormat(format string) error {
	if err := known.Name("format", "formats", format, Formats); err != nil {
		return fmt.Errorf("query: --format: %w", err)
	}
	return nil
}

// LookupTable is the table called name; an unknown name is a usage error
// naming the tables, the closest first.
func LookupTable(name string) (schemas.Table, error) {
	var names []string
	for _, t := range schemas.Tables() {
		if t.Name == name {
			return t, nil
		}
		names = append(names, t.Name)
	}
	return schemas.Table{}, known.Unknown("table", "tables", name, names)
}

// tableColumns are the columns a query of tbl can name: its schema's and
// its partition's.
func tableColumns(tbl schemas.Table) ([]string, error) {
	sch, err := columnar.Schema(tbl)
	if err != nil {
		return nil, err
	}
	var cols []string
	for _, f := range sch.Fields() {
		cols = append(cols, f.Name)
	}
	return append(cols, tbl.Partition), nil
}

// checkColumns refuses, before anything is read, a column the table does
// not have, naming those it has: an empty run would otherwise print no
// rows for a mistyped column.
func checkColumns(tbl schemas.Table, cols []string, where Expr, sel []string) error {
	var err error
	if where != nil {
		where.columns(func(c string) {
			if e := known.Name("column", "columns of "+tbl.Name, c, cols); e != nil && err == nil {
				err = fmt.Errorf("--where: %w", e)
			}
		})
	}
	for _, c := range sel {
		if e := known.Name("column", "columns of "+tbl.Name, c, cols); e != nil && err == nil {
			err = fmt.Errorf("--select: %w", e)
		}
	}
	return err
}

// orderColumns are the columns rows come out ordered by, of those a table
// has: where the row belongs in the run, coarsest first. The partition
// stands in for an iteration where a table has none (tasks' round,
// eval_results' policy).
var orderColumns = []string{"run", "iteration", "", "task_id", "attempt", "chunk", "turn"}

func orderOf(tbl schemas.Table, cols []string) []string {
	var out []string
	for _, c := range orderColumns {
		if c == "" {
			c = tbl.Partition
		}
		if slices.Contains(cols, c) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// Columns splits a comma-separated --select list.
func Columns(list string) []string {
	var sel []string
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c != "" {
			sel = append(sel, c)
		}
	}
	return sel
}

// Run writes the matching rows of every object of tbl in o.Run to w,
// ordered by run, iteration, task, attempt and chunk (those of the table's
// columns), objects read in key order breaking ties, so that a query
// prints the same rows in the same order every time and --limit takes the
// first of them. Ordering holds the matching rows in memory.
func Run(ctx context.Context, st store.ObjectStore, tbl schemas.Table, o Options, w io.Writer) error {
	sel, where := o.Select, o.Where
	cols, err := tableColumns(tbl)
	if err != nil {
		return err
	}
	if err := checkColumns(tbl, cols, where, sel); err != nil {
		return err
	}
	order := orderOf(tbl, cols)
	// Read only the columns the query touches.
	var read []string
	if len(sel) > 0 {
		seen := map[string]bool{}
		add := func(c string) {
			if !seen[c] {
				seen[c] = true
				read = append(read, c)
			}
		}
		for _, c := range sel {
			add(c)
		}
		if where != nil {
			where.columns(add)
		}
		for _, c := range order {
			add(c)
		}
	}
	mem := memory.NewGoAllocator()
	kept, _, err := collect(ctx, st, tbl, o.Run, read, where, source{}, mem)
	defer release(kept)
	if err != nil {
		return err
	}
	return write(ctx, kept, order, o, w, mem)
}

// source narrows which objects collect reads and what it does with one
// that does not read.
type source struct {
	// partition, when set, reads only the objects of that partition (its
	// directory, as keys.TableObject names it).
	partition *int
	// tolerate records an object that does not read in the damage list
	// and reads on, instead of failing the whole read.
	tolerate bool
}

// collect reads the read columns (all when empty) of every object of tbl
// in run that src lets through, keeping the rows where holds for.
// Objects of older minor versions read with the columns added since as
// nulls, so every object gives the same table.
func collect(ctx context.Context, st store.ObjectStore, tbl schemas.Table, run string, read []string, where Expr, src source, mem memory.Allocator) (kept []arrow.RecordBatch, damaged []Damage, err error) {
	objs, err := schemas.TableObjects(ctx, st, run, tbl)
	if err != nil {
		return nil, nil, fmt.Errorf("query: %w", err)
	}
	var dir string
	if src.partition != nil {
		dir = fmt.Sprintf("%s%s-%04d/", keys.TablePrefix(run, tbl.Name), tbl.Dir, *src.partition)
	}
	for _, key := range objs {
		if dir != "" && !strings.HasPrefix(key, dir) {
			continue
		}
		recs, err := readObject(ctx, st, tbl, key, read, where, mem)
		if err != nil && src.tolerate && ctx.Err() == nil {
			damaged = append(damaged, Damage{Key: key, Err: err.Error()})
			continue
		}
		kept = append(kept, recs...)
		if err != nil {
			return kept, damaged, err
		}
	}
	return kept, damaged, nil
}

// ObjectAsWritten reads one object of tbl with the columns its file
// holds, not conformed to this build's table, checked as every read of
// the package is (schemas.Fetch): for readers that must tell a column an
// older writer lacked from a null, as the report's metrics do. The caller
// releases the table.
func ObjectAsWritten(ctx context.Context, st store.ObjectStore, tbl schemas.Table, key string, mem memory.Allocator) (schemas.Version, arrow.Table, error) {
	obj, err := schemas.Fetch(ctx, st, key, nil, tbl.Name)
	if err != nil {
		return schemas.Version{}, nil, err
	}
	at, err := columnar.Table(ctx, obj, nil, mem)
	return obj.Version, at, err
}

// readObject is the rows of one object that where holds for.
func readObject(ctx context.Context, st store.ObjectStore, tbl schemas.Table, key string, read []string, where Expr, mem memory.Allocator) ([]arrow.RecordBatch, error) {
	obj, err := schemas.Fetch(ctx, st, key, nil, tbl.Name)
	if err != nil {
		return nil, err
	}
	at, err := columnar.Conformed(ctx, obj, read, mem)
	if err != nil {
		return nil, err
	}
	defer at.Release()
	tr := array.NewTableReader(at, 64<<10)
	defer tr.Release()
	var kept []arrow.RecordBatch
	for tr.Next() {
		rec, err := filterProject(ctx, tr.RecordBatch(), where, nil)
		if err != nil {
			release(kept)
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		kept = append(kept, rec)
	}
	if err := tr.Err(); err != nil {
		release(kept)
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return kept, nil
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// write sorts the kept rows by order, cuts them to o.Limit, projects
// o.Select and writes them in o.Format.
func write(ctx context.Context, kept []arrow.RecordBatch, order []string, o Options, w io.Writer, mem memory.Allocator) error {
	keys := make([]Order, len(order))
	for i, c := range order {
		keys[i] = Order{Column: c}
	}
	out, err := newSink(o.Format, w)
	if err != nil {
		return err
	}
	if len(kept) > 0 {
		rec, err := sortRows(ctx, kept, keys, mem)
		if err != nil {
			return err
		}
		defer rec.Release()
		if o.Limit > 0 && rec.NumRows() > o.Limit {
			cut := rec.NewSlice(0, o.Limit)
			defer cut.Release()
			rec = cut
		}
		proj, err := filterProject(ctx, rec, nil, o.Select)
		if err != nil {
			return err
		}
		defer proj.Release()
		if proj.NumRows() > 0 {
			if err := out.write(proj); err != nil {
				return err
			}
		}
	}
	return out.close()
}

func filterProject(ctx context.Context, rec arrow.RecordBatch, where Expr, sel []string) (arrow.RecordBatch, error) {
	rec.Retain()
	if where != nil {
		mask, err := where.eval(ctx, rec)
		if err != nil {
			rec.Release()
			return nil, err
		}
		filtered, err := compute.FilterRecordBatch(ctx, rec, mask, compute.DefaultFilterOptions())
		mask.Release()
		rec.Release()
		if err != nil {
			return nil, err
		}
		rec = filtered
	}
	if len(sel) == 0 {
		return rec, nil
	}
	defer rec.Release()
	fields := make([]arrow.Field, len(sel))
	cols := make([]arrow.Array, len(sel))
	for i, c := range sel {
		idx := rec.Schema().FieldIndices(c)
		if len(idx) == 0 {
			return nil, fmt.Errorf("--select: no column %q", c)
		}
		fields[i], cols[i] = rec.Schema().Field(idx[0]), rec.Column(idx[0])
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows()), nil
}

// sink writes record batches in one output format.
type sink struct {
	format string
	w      io.Writer
	tw     *tabwriter.Writer
	cw     *csv.Writer
	ipc    *ipc.Writer
	schema *arrow.Schema
	header bool
	rows   int64
}

func newSink(format string, w io.Writer) (*sink, error) {
	s := &sink{format: format, w: w}
	switch format {
	case "table":
		s.tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	case "csv":
		s.cw = csv.NewWriter(w)
	}
	return s, nil
}

func (s *sink) write(rec arrow.RecordBatch) error {
	if s.schema != nil && !s.schema.Equal(rec.Schema()) && s.format != "json" {
		return fmt.Errorf("query: objects of this table have different schemas (%s vs %s); select common columns with --select",
			s.schema, rec.Schema())
	}
	if s.schema == nil {
		s.schema = rec.Schema()
	}
	switch s.format {
	case "json", "ndjson":
		return s.writeJSON(rec)
	case "arrow":
		if s.ipc == nil {
			s.ipc = ipc.NewWriter(s.w, ipc.WithSchema(rec.Schema()))
		}
		return s.ipc.Write(rec)
	}
	names := make([]string, rec.NumCols())
	for i := range names {
		names[i] = rec.ColumnName(i)
	}
	if !s.header {
		s.header = true
		if err := s.row(names); err != nil {
			return err
		}
	}
	vals := make([]string, rec.NumCols())
	for r := range int(rec.NumRows()) {
		for c := range vals {
			vals[c] = cell(rec.Column(c), r, s.format == "table")
		}
		if err := s.row(vals); err != nil {
			return err
		}
	}
	return nil
}

func (s *sink) row(vals []string) error {
	if s.cw != nil {
		return s.cw.Write(vals)
	}
	_, err := fmt.Fprintln(s.tw, strings.Join(vals, "\t"))
	return err
}

func (s *sink) close() error {
	switch s.format {
	case "table":
		if !s.header {
			fmt.Fprintln(s.tw, "(no rows)")
		}
		return s.tw.Flush()
	case "csv":
		s.cw.Flush()
		return s.cw.Error()
	case "json":
		end := "\n]\n"
		if s.rows == 0 {
			end = "[]\n"
		}
		_, err := io.WriteString(s.w, end)
		return err
	case "arrow":
		if s.ipc == nil {
			// An empty result is still a valid stream, if the schema is
			// unknown it is an empty one.
			s.ipc = ipc.NewWriter(s.w, ipc.WithSchema(arrow.NewSchema(nil, nil)))
		}
		return s.ipc.Close()
	}
	return nil
}

// writeJSON writes each row as an object, its keys in column order: in
// json as the elements of one array, in ndjson one to a line.
func (s *sink) writeJSON(rec arrow.RecordBatch) error {
	keys := make([][]byte, rec.NumCols())
	for c := range keys {
		k, err := jsonout.Marshal(rec.ColumnName(c))
		if err != nil {
			return err
		}
		keys[c] = k
	}
	var b []byte
	for r := range int(rec.NumRows()) {
		b = b[:0]
		switch {
		case s.format == "ndjson":
		case s.rows == 0:
			b = append(b, "[\n"...)
		default:
			b = append(b, ",\n"...)
		}
		s.rows++
		b = append(b, '{')
		for c, k := range keys {
			if c > 0 {
				b = append(b, ',')
			}
			v, err := jsonout.Marshal(rec.Column(c).GetOneForMarshal(r))
			if err != nil {
				return fmt.Errorf("query: %s: %w", rec.ColumnName(c), err)
			}
			b = append(append(append(b, k...), ':'), v...)
		}
		b = append(b, '}')
		if s.format == "ndjson" {
			b = append(b, '\n')
		}
		if _, err := s.w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// cellWidth bounds a cell of the table format in characters, so that a
// row of a wide table stays readable; csv and json keep every value whole.
const cellWidth = 32

// clip cuts v to cellWidth characters, the last an ellipsis.
func clip(v string) string {
	if utf8.RuneCountInString(v) <= cellWidth {
		return v
	}
	r := []rune(v)
	return string(r[:cellWidth-1]) + "…"
}

// cell renders one value. Lists and binary values are shortened in the
// table format so a row fits a terminal line.
func cell(arr arrow.Array, i int, short bool) string {
	if arr.IsNull(i) {
		return "null"
	}
	switch a := arr.(type) {
	case *array.String:
		v := a.Value(i)
		if short {
			v = clip(strings.Join(strings.Fields(v), " "))
		}
		return v
	case *array.Binary:
		v := a.Value(i)
		if short {
			return fmt.Sprintf("<%d bytes>", len(v))
		}
		return base64.StdEncoding.EncodeToString(v)
	case *array.List:
		start, end := a.ValueOffsets(i)
		n := int(end - start)
		if short && n > 8 {
			parts := make([]string, 0, 5)
			for j := range 4 {
				parts = append(parts, cell(a.ListValues(), int(start)+j, true))
			}
			return "[" + strings.Join(parts, " ") + fmt.Sprintf(" … (%d)]", n)
		}
	}
	b, err := jsonout.Marshal(arr.GetOneForMarshal(i))
	s := string(b)
	if err != nil || len(s) >= 2 && s[0] == '"' {
		s = arr.ValueStr(i)
	}
	if short {
		s = clip(s)
	}
	return s
}

// Parse checks the options a command line set and sets Where and Select
// from their text: a --where filter and a comma-separated --select.
func (o *Options) Parse(where, sel string) error {
	if o.Run == "" {
		return exit.Configf("query: --run is required")
	}
	if err := checkFormat(o.Format); err != nil {
		return err
	}
	if where != "" {
		var err error
		if o.Where, err = ParseWhere(where); err != nil {
			return exit.With(exit.Config, err)
		}
	}
	o.Select = Columns(sel)
	return nil
}
