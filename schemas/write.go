package schemas

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/store"
)

// DefaultZstdLevel is the zstd level of every table. parquet-go's default
// level barely compresses id bytes; "better" (≈ zstd 7) does at a
// write speed the pipeline does not notice.
const DefaultZstdLevel = zstd.SpeedBetterCompression

// WriterOptions tunes a Writer. Zero values take the defaults.
type WriterOptions struct {
	// RowGroupRows caps the rows of one row group. Default: 256 for the
	// per-chunk tables (tokens, routing, values; rows hold whole token
	// sequences, so 256 rows are tens of MB), 65536 otherwise.
	RowGroupRows int64
	// ZstdLevel defaults to DefaultZstdLevel.
	ZstdLevel zstd.Level
	// TempDir is where the file is spooled; default os.TempDir().
	TempDir string
}

// Writer builds one Parquet object of table T. The object's key is a hash
// of its content, known only once the file is complete, so rows are spooled
// to a temporary file (never held in memory) and uploaded by Commit.
type Writer[T Row] struct {
	table Table
	f     *os.File
	sum   hash.Hash
	n     int64
	pw    *parquet.GenericWriter[T]
	rows  int64
	done  bool

	// For a table with wall-clock columns the key hashes the rows without
	// them (ident, over Canonical encodings); otherwise it is the SHA-256
	// of the file.
	ident  hash.Hash
	schema *parquet.Schema
	canon  Canonical
	enc    []byte
	row    parquet.Row
}

type hashCounter struct {
	w   io.Writer
	sum hash.Hash
	n   *int64
}

func (h hashCounter) Write(p []byte) (int, error) {
	h.sum.Write(p)
	*h.n += int64(len(p))
	return h.w.Write(p)
}

// NewWriter starts a Parquet object of T's table.
func NewWriter[T Row](o WriterOptions) (*Writer[T], error) {
	var zero T
	t := zero.Table()
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = 65536
		switch t.Name {
		case TokensTable.Name, RoutingTable.Name, ValuesTable.Name:
			o.RowGroupRows = 256
		}
	}
	if o.ZstdLevel == 0 {
		o.ZstdLevel = DefaultZstdLevel
	}
	f, err := os.CreateTemp(o.TempDir, "t1-"+t.Name+"-*.parquet")
	if err != nil {
		return nil, fmt.Errorf("%s writer: %w", t.Name, err)
	}
	w := &Writer[T]{table: t, f: f, sum: sha256.New()}
	w.pw = parquet.NewGenericWriter[T](hashCounter{w: f, sum: w.sum, n: &w.n}, writerOptions(t, o)...)
	if len(t.WallClock()) > 0 {
		w.ident, w.schema = sha256.New(), parquet.SchemaOf(zero)
		w.canon = NewCanonical(t, w.schema)
	}
	return w, nil
}

// blobColumns hold large opaque values. Their min/max statistics would
// copy whole values into page headers, the column index and the footer
// (a 1.5 MB routing record stored five times over), so they get none.
var blobColumns = map[string][]string{
	TasksTable.Name:   {"instruction"},
	TurnsTable.Name:   {"action", "observation"},
	RoutingTable.Name: {"record"},
}

func writerOptions(t Table, o WriterOptions) []parquet.WriterOption {
	opts := []parquet.WriterOption{
		parquet.Compression(&zstd.Codec{Level: o.ZstdLevel}),
		parquet.MaxRowsPerRowGroup(o.RowGroupRows),
		// Constant, so equal rows give equal bytes across t1 builds.
		parquet.CreatedBy("t1", "1", "t1pipe"),
		parquet.KeyValueMetadata(MetaTable, t.Name),
		parquet.KeyValueMetadata(MetaVersion, t.Version.String()),
	}
	for _, c := range blobColumns[t.Name] {
		opts = append(opts, parquet.SkipPageBounds(c), parquet.SkipPageStatistics(c))
	}
	return opts
}

// Write appends rows.
func (w *Writer[T]) Write(rows []T) error {
	if w.done {
		return fmt.Errorf("%s writer: write after commit or close", w.table.Name)
	}
	if _, err := w.pw.Write(rows); err != nil {
		return fmt.Errorf("%s writer: %w", w.table.Name, err)
	}
	if w.ident != nil {
		for i := range rows {
			w.row = w.schema.Deconstruct(w.row[:0], &rows[i])
			w.enc = w.canon.Append(w.enc[:0], w.row)
			w.ident.Write(binary.AppendUvarint(nil, uint64(len(w.enc))))
			w.ident.Write(w.enc)
		}
	}
	w.rows += int64(len(rows))
	return nil
}

// Rows is the number of rows written so far.
func (w *Writer[T]) Rows() int64 { return w.rows }

// Commit finishes the file and stores it at
// runs/<run>/<table>/<partition column>=NNNN/part-<hash[:32]>.parquet
// (keys.TableObject), where hash is the file's SHA-256, or, for a table with wall-clock
// columns (Table.WallClock), the SHA-256 of its rows without them. The
// same rows give the same key: a second Commit of them finds the object
// present and returns the FileRef of the stored object without writing —
// the same FileRef, unless only wall-clock columns differ, in which case
// the first object stands and its own size and SHA-256 are returned. The
// writer is closed afterwards either way.
func (w *Writer[T]) Commit(ctx context.Context, st store.ObjectStore, run string, partition int) (FileRef, error) {
	defer w.Close()
	ref, err := w.finish(run, partition)
	if err != nil {
		return FileRef{}, err
	}
	return w.store(ctx, st, ref)
}

// finish completes the file and returns the FileRef it will be stored
// under, storing nothing.
func (w *Writer[T]) finish(run string, partition int) (FileRef, error) {
	if w.done {
		return FileRef{}, fmt.Errorf("%s writer: commit after commit or close", w.table.Name)
	}
	if err := w.pw.Close(); err != nil {
		return FileRef{}, fmt.Errorf("%s writer: finish file: %w", w.table.Name, err)
	}
	sum := hex.EncodeToString(w.sum.Sum(nil))
	id := sum
	if w.ident != nil {
		id = hex.EncodeToString(w.ident.Sum(nil))
	}
	key, err := keys.TableObject(run, w.table.Name, w.table.Dir, partition, id)
	if err != nil {
		return FileRef{}, err
	}
	return FileRef{Key: key, Table: w.table.Name, SchemaVersion: w.table.Version.String(), Rows: w.rows, Bytes: w.n, SHA256: sum}, nil
}

// store puts the finished file at ref.Key if absent; see Commit.
func (w *Writer[T]) store(ctx context.Context, st store.ObjectStore, ref FileRef) (FileRef, error) {
	key := ref.Key
	if _, err := w.f.Seek(0, io.SeekStart); err != nil {
		return FileRef{}, fmt.Errorf("%s: rewind spool: %w", key, err)
	}
	_, err := st.PutIfAbsent(ctx, key, w.f, w.n, store.PutOptions{
		ContentType: "application/vnd.apache.parquet",
		Metadata:    map[string]string{"sha256": ref.SHA256, "t1-table": w.table.Name, "t1-schema-version": ref.SchemaVersion},
	})
	if errors.Is(err, store.ErrExists) {
		// Content-addressed: an object under this key holds these bytes,
		// unless it was damaged; a size check catches a truncated upload.
		info, serr := st.Stat(ctx, key)
		if serr != nil {
			return FileRef{}, fmt.Errorf("%s: %w", key, serr)
		}
		if w.ident != nil {
			return storedRef(key, ref, info)
		}
		if info.Size != w.n {
			return FileRef{}, fmt.Errorf("%s exists with %d bytes, this content has %d", key, info.Size, w.n)
		}
		return ref, nil
	}
	if err != nil {
		return FileRef{}, fmt.Errorf("%s: %w", key, err)
	}
	return ref, nil
}

// storedRef is the FileRef of the object at key that holds ref's rows but
// for their wall-clock columns, from the size and the SHA-256 and schema
// version the writer stored in its metadata.
func storedRef(key string, ref FileRef, info store.ObjectInfo) (FileRef, error) {
	sum := info.Metadata["sha256"]
	if len(sum) != 64 {
		return FileRef{}, fmt.Errorf("%s exists without the sha256 its writer stores", key)
	}
	ref.Bytes, ref.SHA256 = info.Size, sum
	if v := info.Metadata["t1-schema-version"]; v != "" {
		ref.SchemaVersion = v
	}
	return ref, nil
}

// Close discards an uncommitted writer and removes its spool file.
func (w *Writer[T]) Close() error {
	if w.done {
		return nil
	}
	w.done = true
	name := w.f.Name()
	err := w.f.Close()
	if rerr := os.Remove(name); err == nil && rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return err
}

// WriteTable writes rows as one object; see Writer.Commit.
func WriteTable[T Row](ctx context.Context, st store.ObjectStore, run string, partition int, rows []T, o WriterOptions) (FileRef, error) {
	w, err := NewWriter[T](o)
	if err != nil {
		return FileRef{}, err
	}
	defer w.Close()
	if err := w.Write(rows); err != nil {
		return FileRef{}, err
	}
	return w.Commit(ctx, st, run, partition)
}
