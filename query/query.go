package query

import (
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/t1pipe/t1/schemas"
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

// Formats are the output formats a query writes.
var Formats = []string{"table", "csv", "json", "arrow"}

// checkFormat refuses a format a query cannot write.
func checkFormat(format string) error {
	if !slices.Contains(Formats, format) {
		return fmt.Errorf("query: --format %q: want table, csv, json or arrow", format)
	}
	return nil
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

// Run streams the matching rows of every object of tbl in o.Run to w, one
// record batch at a time.
func Run(ctx context.Context, st store.ObjectStore, tbl schemas.Table, o Options, w io.Writer) error {
	sel, where := o.Select, o.Where
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
	}
	objs, err := schemas.TableObjects(ctx, st, o.Run, tbl)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	out, err := newSink(o.Format, w)
	if err != nil {
		return err
	}
	mem := memory.NewGoAllocator()
	left := o.Limit
	for _, key := range objs {
		if o.Limit > 0 && left <= 0 {
			break
		}
		obj, err := schemas.Fetch(ctx, st, key, nil, tbl.Name)
		if err != nil {
			return err
		}
		// Objects of older minor versions read with the columns added
		// since as nulls, so every object prints as the same table.
		at, err := obj.Conformed(ctx, read, mem)
		if err != nil {
			return err
		}
		err = func() error {
			defer at.Release()
			tr := array.NewTableReader(at, 64<<10)
			defer tr.Release()
			for tr.Next() {
				rec, err := filterProject(ctx, tr.RecordBatch(), where, sel)
				if err != nil {
					return fmt.Errorf("%s: %w", key, err)
				}
				if o.Limit > 0 && rec.NumRows() > left {
					cut := rec.NewSlice(0, left)
					rec.Release()
					rec = cut
				}
				left -= rec.NumRows()
				err = out.write(rec)
				rec.Release()
				if err != nil {
					return err
				}
				if o.Limit > 0 && left <= 0 {
					break
				}
			}
			return tr.Err()
		}()
		if err != nil {
			return err
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
	case "json":
		return array.RecordToJSON(rec, s.w)
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
			v = strings.Join(strings.Fields(v), " ")
			if len(v) > 60 {
				v = v[:57] + "..."
			}
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
	b, err := json.Marshal(arr.GetOneForMarshal(i))
	if err != nil {
		return arr.ValueStr(i)
	}
	s := string(b)
	if len(s) >= 2 && s[0] == '"' {
		s = arr.ValueStr(i)
	}
	return s
}

// Parse checks the options a command line set and sets Where and Select
// from their text: a --where filter and a comma-separated --select.
func (o *Options) Parse(where, sel string) error {
	if o.Run == "" {
		return fmt.Errorf("query: --run is required")
	}
	if err := checkFormat(o.Format); err != nil {
		return err
	}
	if where != "" {
		var err error
		if o.Where, err = ParseWhere(where); err != nil {
			return err
		}
	}
	o.Select = Columns(sel)
	return nil
}
