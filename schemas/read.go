package schemas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"

	"github.com/t1pipe/t1/store"
)

// ErrSchema is wrapped by errors about a file's table name or schema
// version.
var ErrSchema = errors.New("schema mismatch")

// Object is a fetched Parquet object whose metadata has been checked.
type Object struct {
	Key     string
	Table   Table   // the table the file says it belongs to, at this build's version
	Version Version // the file's version
	Data    []byte
	// verified is set when the bytes matched a SHA-256 (a FileRef's or
	// the one the writer stored in the object's metadata).
	verified bool
}

// Fetch reads key from st. When ref is not nil, the bytes must match its
// size and SHA-256. want, when not empty, is the table the caller expects.
// Every error names the key.
func Fetch(ctx context.Context, st store.ObjectStore, key string, ref *FileRef, want string) (*Object, error) {
	if ref != nil && ref.Key != key {
		return nil, fmt.Errorf("%s: the reference is for %s", key, ref.Key)
	}
	rc, info, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		// A compaction may have taken the object in: its record still
		// serves the claim check.
		o, found, cerr := compacted(ctx, st, key, ref, want)
		if found || cerr != nil {
			return o, cerr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", key, err)
	}
	if ref == nil {
		if sum := info.Metadata["sha256"]; sum != "" {
			got := sha256.Sum256(data)
			if hex.EncodeToString(got[:]) != sum {
				return nil, fmt.Errorf("%s: SHA-256 %x, the object's metadata says %s", key, got, sum)
			}
			o, err := Parse(key, data, nil, want)
			if err == nil {
				o.verified = true
			}
			return o, err
		}
	}
	return Parse(key, data, ref, want)
}

// Parse checks data, the bytes of a Parquet object named key (an object
// key or a file path, used in errors), as Fetch does.
func Parse(key string, data []byte, ref *FileRef, want string) (*Object, error) {
	if ref != nil {
		if int64(len(data)) != ref.Bytes {
			return nil, fmt.Errorf("%s: %d bytes, the reference says %d", key, len(data), ref.Bytes)
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != ref.SHA256 {
			return nil, fmt.Errorf("%s: SHA-256 %s, the reference says %s", key, got, ref.SHA256)
		}
	}
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable Parquet file (truncated or corrupted?): %w", key, err)
	}
	name, _ := pf.Lookup(MetaTable)
	ver, _ := pf.Lookup(MetaVersion)
	t, v, err := CheckMetadata(key, name, ver, want)
	if err != nil {
		return nil, err
	}
	if ref != nil && pf.NumRows() != ref.Rows {
		return nil, fmt.Errorf("%s: %d rows, the reference says %d", key, pf.NumRows(), ref.Rows)
	}
	return &Object{Key: key, Table: t, Version: v, Data: data, verified: ref != nil}, nil
}

// CheckMetadata validates a file's table name and schema version from its
// key-value metadata against this build (and against want, if not empty).
func CheckMetadata(key, name, version, want string) (Table, Version, error) {
	if name == "" {
		return Table{}, Version{}, fmt.Errorf("%s: %w: no %s in the file's metadata (not written by t1?)", key, ErrSchema, MetaTable)
	}
	if want != "" && name != want {
		return Table{}, Version{}, fmt.Errorf("%s: %w: file holds table %q, want %q", key, ErrSchema, name, want)
	}
	t, err := LookupTable(name)
	if err != nil {
		return Table{}, Version{}, fmt.Errorf("%s: %w: %w", key, ErrSchema, err)
	}
	v, err := ParseVersion(version)
	if err != nil {
		return Table{}, Version{}, fmt.Errorf("%s: %w: %w", key, ErrSchema, err)
	}
	if v.Major != t.Version.Major {
		return Table{}, Version{}, fmt.Errorf("%s: %w: table %s schema version %s, this build reads major version %d",
			key, ErrSchema, name, v, t.Version.Major)
	}
	return t, v, nil
}

// ReadRows reads every row of a small table object into T; see Fetch for
// ref. Use ReadArrow for large objects.
func ReadRows[T Row](ctx context.Context, st store.ObjectStore, key string, ref *FileRef) ([]T, error) {
	var zero T
	o, err := Fetch(ctx, st, key, ref, zero.Table().Name)
	if err != nil {
		return nil, err
	}
	return DecodeRows[T](o)
}

// DecodeRows decodes a checked object into T.
func DecodeRows[T Row](o *Object) ([]T, error) {
	var zero T
	if o.Table.Name != zero.Table().Name {
		return nil, fmt.Errorf("%s: %w: file holds table %q, want %q", o.Key, ErrSchema, o.Table.Name, zero.Table().Name)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(o.Data), int64(len(o.Data)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Key, err)
	}
	r := parquet.NewGenericReader[T](pf)
	defer r.Close()
	rows := make([]T, pf.NumRows())
	n := 0
	for n < len(rows) {
		m, err := r.Read(rows[n:])
		n += m
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", o.Key, n, err)
		}
	}
	if n != len(rows) {
		return nil, fmt.Errorf("%s: read %d of %d rows", o.Key, n, len(rows))
	}
	return rows, nil
}

// ReadArrow reads an object as an Arrow table with arrow-go's parallel
// column readers; see Fetch for ref and want. columns, when not empty,
// selects top-level columns by name. The caller releases the table.
func ReadArrow(ctx context.Context, st store.ObjectStore, key string, ref *FileRef, want string, columns []string, mem memory.Allocator) (arrow.Table, error) {
	o, err := Fetch(ctx, st, key, ref, want)
	if err != nil {
		return nil, err
	}
	return o.Arrow(ctx, columns, mem)
}

// Arrow decodes the object as an Arrow table; see ReadArrow.
func (o *Object) Arrow(ctx context.Context, columns []string, mem memory.Allocator) (_ arrow.Table, err error) {
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
	if !o.verified {
		if err := o.checkPages(); err != nil {
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
		idx, lerr := o.leaves(pr, columns)
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

// checkPages reads every page once, which verifies the page CRCs that
// t1's writer stores.
func (o *Object) checkPages() error {
	pf, err := parquet.OpenFile(bytes.NewReader(o.Data), int64(len(o.Data)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return fmt.Errorf("%s: %w", o.Key, err)
	}
	for g, rg := range pf.RowGroups() {
		for c, cc := range rg.ColumnChunks() {
			pages := cc.Pages()
			for {
				p, err := pages.ReadPage()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					pages.Close()
					return fmt.Errorf("%s: row group %d column %d: %w", o.Key, g, c, err)
				}
				parquet.Release(p)
			}
			pages.Close()
		}
	}
	return nil
}

// Records streams the object as Arrow record batches of up to batchRows
// rows (columns as in Arrow), for objects too large to hold as one
// table. The caller releases the reader.
func (o *Object) Records(ctx context.Context, columns []string, batchRows int64, mem memory.Allocator) (pqarrow.RecordReader, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	if !o.verified {
		if err := o.checkPages(); err != nil {
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
	leaves, err := o.leaves(pr, columns)
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
func (o *Object) leaves(pr *file.Reader, columns []string) ([]int, error) {
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
