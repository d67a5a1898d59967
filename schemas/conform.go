package schemas

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"
)

// emptyFiles writes a file of each table's rows with none in it, whose
// schema is the table's at this build's version.
var emptyFiles = map[string]func() ([]byte, error){
	TasksTable.Name:        emptyFile[TaskRow],
	AuditsTable.Name:       emptyFile[AuditRow],
	TrajectoriesTable.Name: emptyFile[TrajectoryRow],
	TurnsTable.Name:        emptyFile[TurnRow],
	TokensTable.Name:       emptyFile[TokenRow],
	RoutingTable.Name:      emptyFile[RoutingRow],
	RewardsTable.Name:      emptyFile[RewardRow],
	ValuesTable.Name:       emptyFile[ValueRow],
	MetricsTable.Name:      emptyFile[MetricRow],
	EvalResultsTable.Name:  emptyFile[EvalResultRow],
}

func emptyFile[T Row]() ([]byte, error) {
	var zero T
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, writerOptions(zero.Table(), WriterOptions{ZstdLevel: DefaultZstdLevel, RowGroupRows: 1})...)
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var arrowSchemas sync.Map // table name → *arrow.Schema

// ArrowSchema is the Arrow schema of a file of t that this build writes,
// as arrow-go reads it.
func ArrowSchema(t Table) (*arrow.Schema, error) {
	if s, ok := arrowSchemas.Load(t.Name); ok {
		return s.(*arrow.Schema), nil
	}
	mk, ok := emptyFiles[t.Name]
	if !ok {
		return nil, fmt.Errorf("schemas: no row type for table %s", t.Name)
	}
	data, err := mk()
	if err != nil {
		return nil, fmt.Errorf("schemas: table %s: %w", t.Name, err)
	}
	pr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("schemas: table %s: %w", t.Name, err)
	}
	defer pr.Close()
	s, err := pqarrow.FromParquet(pr.MetaData().Schema, nil, pr.MetaData().KeyValueMetadata())
	if err != nil {
		return nil, fmt.Errorf("schemas: table %s: %w", t.Name, err)
	}
	s = arrow.NewSchema(s.Fields(), nil)
	arrowSchemas.Store(t.Name, s)
	return s, nil
}

// Conformed is Arrow for a reader that expects the table as this build
// writes it: a file of an older minor version reads with the columns
// added since as nulls, so that objects of several minors read as one
// table. columns selects top-level columns (empty: all of the current
// version's); naming one the current version does not have is an error.
// Every column of the result is nullable, whichever version the object
// is, so that the objects' tables have one schema.
func (o *Object) Conformed(ctx context.Context, columns []string, mem memory.Allocator) (arrow.Table, error) {
	cur, err := ArrowSchema(o.Table)
	if err != nil {
		return nil, err
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	want := columns
	if len(want) == 0 {
		for _, f := range cur.Fields() {
			want = append(want, f.Name)
		}
	}
	pr, err := file.NewParquetReader(bytes.NewReader(o.Data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	rows := pr.NumRows()
	have := topColumns(pr)
	pr.Close()
	var read []string
	for _, c := range want {
		if _, ok := have[c]; ok {
			read = append(read, c)
			continue
		}
		if _, ok := cur.FieldsByName(c); !ok {
			return nil, fmt.Errorf("%s: no column %q in table %s", o.Key, c, o.Table.Name)
		}
		if o.Version.Minor >= o.Table.Version.Minor {
			return nil, fmt.Errorf("%s: table %s version %s has no column %q", o.Key, o.Table.Name, o.Version, c)
		}
	}
	var got arrow.Table
	if len(read) > 0 {
		if got, err = o.Arrow(ctx, read, mem); err != nil {
			return nil, err
		}
		defer got.Release()
	}
	fields := make([]arrow.Field, 0, len(want))
	cols := make([]arrow.Column, 0, len(want))
	defer func() {
		for i := range cols {
			cols[i].Release()
		}
	}()
	for _, c := range want {
		fs, _ := cur.FieldsByName(c)
		f := fs[0]
		f.Nullable = true
		var chunked *arrow.Chunked
		if idx := fieldIndex(got, c); idx >= 0 {
			chunked = got.Column(idx).Data()
			chunked.Retain()
		} else {
			nulls := array.MakeArrayOfNull(mem, f.Type, int(rows))
			chunked = arrow.NewChunked(f.Type, []arrow.Array{nulls})
			nulls.Release()
		}
		fields, cols = append(fields, f), append(cols, *arrow.NewColumn(f, chunked))
		chunked.Release()
	}
	return array.NewTable(arrow.NewSchema(fields, nil), cols, rows), nil
}

// fieldIndex is the index of the column named c in t, or -1 (also when t
// is nil).
func fieldIndex(t arrow.Table, c string) int {
	if t == nil {
		return -1
	}
	if idx := t.Schema().FieldIndices(c); len(idx) > 0 {
		return idx[0]
	}
	return -1
}
