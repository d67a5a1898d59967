package columnar

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

	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// Read reads an object as an Arrow table with arrow-go's parallel
// column readers; see schemas.Fetch for ref and want. columns, when not empty,
// selects top-level columns by name. The caller releases the table.
func Read(ctx context.Context, st store.ObjectStore, key string, ref *schemas.FileRef, want string, columns []string, mem memory.Allocator) (arrow.Table, error) {
	o, err := schemas.Fetch(ctx, st, key, ref, want)
	if err != nil {
		return nil, err
	}
	return Table(ctx, o, columns, mem)
}

// Table decodes a fetched object as an Arrow table; see Read.
func Table(ctx context.Context, o *schemas.Object, columns []string, mem memory.Allocator) (_ arrow.Table, err error) {
	// Damaged pages can trip assertions inside the decoder; report them
	// as errors about the object rather than crash the reader.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: decode (truncated or corrupted?): %v", o.Key, p)
		}
	}()
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	// arrow-go does not check page checksums; without a verified hash,
	// let parquet-go check them first so damage is never read as data.
	if !o.Verified() {
		if err := o.CheckPages(); err != nil {
			return nil, err
		}
	}
	pr, err := file.NewParquetReader(bytes.NewReader(o.Data), file.WithReadProps(nil))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	defer pr.Close()
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{Parallel: true, BatchSize: 64 << 10}, mem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	var tbl arrow.Table
	if len(columns) == 0 {
		tbl, err = fr.ReadTable(ctx)
	} else {
		idx, lerr := leaves(o, pr, columns)
		if lerr != nil {
			return nil, lerr
		}
		rgs := make([]int, pr.NumRowGroups())
		for i := range rgs {
			rgs[i] = i
		}
		tbl, err = fr.ReadRowGroups(ctx, idx, rgs)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: decode (truncated or corrupted?): %w", o.Key, err)
	}
	return tbl, nil
}

// Records streams the object as Arrow record batches of up to batchRows
// rows (columns as in Arrow), for objects too large to hold as one
// table. The caller releases the reader.
func Records(ctx context.Context, o *schemas.Object, columns []string, batchRows int64, mem memory.Allocator) (pqarrow.RecordReader, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if !o.Verified() {
		if err := o.CheckPages(); err != nil {
			return nil, err
		}
	}
	pr, err := file.NewParquetReader(bytes.NewReader(o.Data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{Parallel: true, BatchSize: batchRows}, mem)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	leaves, err := leaves(o, pr, columns)
	if err != nil {
		return nil, err
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	return rr, nil
}

// leaves maps top-level column names to Parquet leaf column indices; nil
// columns selects all (nil).
func leaves(o *schemas.Object, pr *file.Reader, columns []string) ([]int, error) {
	if len(columns) == 0 {
		return nil, nil
	}
	byName := topColumns(pr)
	var idx []int
	for _, c := range columns {
		l, ok := byName[c]
		if !ok {
			return nil, fmt.Errorf("%s: no column %q in table %s", o.Key, c, o.Table.Name)
		}
		idx = append(idx, l...)
	}
	return idx, nil
}

// topColumns maps each of a file's top-level columns to its Parquet leaf
// column indices.
func topColumns(pr *file.Reader) map[string][]int {
	descr := pr.MetaData().Schema
	leaves := map[string][]int{}
	for i := range descr.NumColumns() {
		if p := descr.Column(i).ColumnPath(); len(p) > 0 {
			leaves[p[0]] = append(leaves[p[0]], i)
		}
	}
	return leaves
}

var arrowSchemas sync.Map // table name → *arrow.Schema

// Schema is the Arrow schema of a file of t that this build writes,
// as arrow-go reads it.
func Schema(t schemas.Table) (*arrow.Schema, error) {
	if s, ok := arrowSchemas.Load(t.Name); ok {
		return s.(*arrow.Schema), nil
	}
	data, err := schemas.EmptyFile(t)
	if err != nil {
		return nil, err
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

// Conformed is Table for a reader that expects the table as this build
// writes it: a file of an older minor version reads with the columns
// added since as nulls, so that objects of several minors read as one
// table. columns selects top-level columns (empty: all of the current
// version's); naming one the current version does not have is an error.
// Every column of the result is nullable, whichever version the object
// is, so that the objects' tables have one schema.
func Conformed(ctx context.Context, o *schemas.Object, columns []string, mem memory.Allocator) (arrow.Table, error) {
	cur, err := Schema(o.Table)
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
		if got, err = Table(ctx, o, read, mem); err != nil {
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
