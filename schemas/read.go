package schemas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

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
// ref. Use columnar.Read for large objects.
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

// CheckPages reads every page once, which verifies the page CRCs that
// t1's writer stores: readers that do not check them (arrow-go) call it
// first unless Verified.
func (o *Object) CheckPages() error {
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

// Verified says whether the bytes matched a SHA-256 (a FileRef's or the
// one the writer stored in the object's metadata).
func (o *Object) Verified() bool { return o.verified }
