package schemas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/store"
)

// CompactionFormat names the compaction record format.
const CompactionFormat = "t1.compaction/1"

// MaxCompactedBytes bounds the source bytes one compacted object takes in:
// a partition of more gets several, so neither a compaction nor a reader
// of one object holds a whole iteration of tokens or routing.
const MaxCompactedBytes = 256 << 20

// CompactionRecord says which objects of a table partition one compacted
// object holds, and where: Sources in the order their rows follow each
// other in Object, each with the row Offset its rows start at. It is
// stored (content-addressed, keys.CompactionRecord) before the object and
// before any source is deleted, so every claim check an event or a batch
// manifest carries stays readable through it (Fetch).
type CompactionRecord struct {
	Format    string            `json:"format"`
	Table     string            `json:"table"`
	Partition int               `json:"partition"`
	Object    FileRef           `json:"object"`
	Sources   []CompactedSource `json:"sources"`
}

// CompactedSource is one object a compaction took in.
type CompactedSource struct {
	FileRef
	Offset int64 `json:"offset"`
}

// source finds key among the record's sources.
func (r *CompactionRecord) source(key string) (CompactedSource, bool) {
	for _, s := range r.Sources {
		if s.Key == key {
			return s, true
		}
	}
	return CompactedSource{}, false
}

// Compact compacts one partition of run's table: the objects under it
// that no compaction took in yet, at the table's current schema version,
// become one object (more past MaxCompactedBytes) of the same rows, in
// key order. The order of writes makes a crash at any point lose and
// duplicate nothing: the record first, then the compacted object, then
// the deletion of the sources; a compaction run again finishes what a
// crashed one left (the same sources give the same object) and deletes a
// source that a late writer stored again. A partition of one object is
// left as it is. It returns the number of objects compacted.
func Compact(ctx context.Context, st store.ObjectStore, run string, t Table, partition int, o WriterOptions) (int, error) {
	c, ok := codecs[t.Name]
	if !ok {
		return 0, fmt.Errorf("compact: unknown table %q", t.Name)
	}
	recs, err := partitionRecords(ctx, st, run, t, partition)
	if err != nil {
		return 0, err
	}
	present := map[string]store.ObjectInfo{}
	var listed []store.ObjectInfo
	for info, err := range st.List(ctx, keys.TablePartition(run, t.Name, t.Dir, partition)) {
		if err != nil {
			return 0, fmt.Errorf("compact %s: %w", t.Name, err)
		}
		if strings.HasSuffix(info.Key, ".parquet") {
			present[info.Key] = info
			listed = append(listed, info)
		}
	}
	covered := map[string]bool{}
	n := 0
	for _, r := range recs {
		covered[r.Object.Key] = true
		if _, ok := present[r.Object.Key]; !ok {
			// A crash between the record and its object: build it again
			// from the sources, all still there.
			var srcs []*Object
			for _, s := range r.Sources {
				src := s.FileRef
				obj, err := Fetch(ctx, st, s.Key, &src, t.Name)
				if err != nil {
					return n, fmt.Errorf("compact: finish %s: %w", r.Object.Key, err)
				}
				srcs = append(srcs, obj)
			}
			if err := storeCompacted(ctx, st, c, run, partition, srcs, o, &r); err != nil {
				return n, err
			}
		}
		for _, s := range r.Sources {
			covered[s.Key] = true
			if _, ok := present[s.Key]; ok {
				if err := st.Delete(ctx, s.Key); err != nil {
					return n, fmt.Errorf("compact: delete %s: %w", s.Key, err)
				}
				n++
			}
		}
	}
	var group []*Object
	var size int64
	flush := func() error {
		if len(group) > 1 {
			if err := compactGroup(ctx, st, c, run, t, partition, group, o); err != nil {
				return err
			}
			n += len(group)
		}
		group, size = nil, 0
		return nil
	}
	for _, info := range listed {
		if covered[info.Key] {
			continue
		}
		obj, err := Fetch(ctx, st, info.Key, nil, t.Name)
		if err != nil {
			return n, fmt.Errorf("compact: %w", err)
		}
		if obj.Version != t.Version {
			continue // an older build's object stays as it was written
		}
		if size+int64(len(obj.Data)) > MaxCompactedBytes && len(group) > 0 {
			if err := flush(); err != nil {
				return n, err
			}
		}
		group = append(group, obj)
		size += int64(len(obj.Data))
	}
	return n, flush()
}

// compactGroup stores the record of srcs, their compacted object, and
// then deletes them.
func compactGroup(ctx context.Context, st store.ObjectStore, c codec, run string, t Table, partition int, srcs []*Object, o WriterOptions) error {
	r := CompactionRecord{Format: CompactionFormat, Table: t.Name, Partition: partition}
	b, offsets, err := c.build(run, partition, srcs, o)
	if err != nil {
		return err
	}
	defer b.close()
	r.Object = b.ref
	for i, s := range srcs {
		sum := sha256.Sum256(s.Data)
		r.Sources = append(r.Sources, CompactedSource{Offset: offsets[i], FileRef: FileRef{Key: s.Key, Table: t.Name,
			SchemaVersion: s.Version.String(), Rows: offsets[i+1] - offsets[i], Bytes: int64(len(s.Data)), SHA256: hex.EncodeToString(sum[:])}})
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	key := keys.CompactionRecord(run, t.Name, t.Dir, partition, hex.EncodeToString(sum[:]))
	_, err = st.PutIfAbsent(ctx, key, bytes.NewReader(data), int64(len(data)), store.PutOptions{
		ContentType: "application/json", Metadata: map[string]string{"sha256": hex.EncodeToString(sum[:])}})
	if err != nil && !errors.Is(err, store.ErrExists) {
		return fmt.Errorf("compact: %s: %w", key, err)
	}
	if _, err := b.store(ctx, st); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	for _, s := range srcs {
		if err := st.Delete(ctx, s.Key); err != nil {
			return fmt.Errorf("compact: delete %s: %w", s.Key, err)
		}
	}
	return nil
}

// storeCompacted builds r's object from srcs again and stores it, after
// checking that it is the object r names.
func storeCompacted(ctx context.Context, st store.ObjectStore, c codec, run string, partition int, srcs []*Object, o WriterOptions, r *CompactionRecord) error {
	b, _, err := c.build(run, partition, srcs, o)
	if err != nil {
		return err
	}
	defer b.close()
	if b.ref.Key != r.Object.Key || b.ref.SHA256 != r.Object.SHA256 {
		return fmt.Errorf("compact: the sources of %s build %s (SHA-256 %s)", r.Object.Key, b.ref.Key, b.ref.SHA256)
	}
	_, err = b.store(ctx, st)
	return err
}

// partitionRecords reads every compaction record of a partition.
func partitionRecords(ctx context.Context, st store.ObjectStore, run string, t Table, partition int) ([]CompactionRecord, error) {
	return records(ctx, st, keys.CompactionRecords(run, t.Name, t.Dir, partition))
}

// records reads every compaction record under prefix, checking each
// against the SHA-256 its key names.
func records(ctx context.Context, st store.ObjectStore, prefix string) ([]CompactionRecord, error) {
	var out []CompactionRecord
	for info, err := range st.List(ctx, prefix) {
		if err != nil {
			return nil, fmt.Errorf("compaction records %s: %w", prefix, err)
		}
		rc, _, err := st.Get(ctx, info.Key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", info.Key, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", info.Key, err)
		}
		sum := sha256.Sum256(data)
		if !strings.HasSuffix(info.Key, "record-"+hex.EncodeToString(sum[:16])+".json") {
			return nil, fmt.Errorf("%s: SHA-256 %x does not match the key", info.Key, sum)
		}
		var r CompactionRecord
		if err := json.Unmarshal(data, &r); err != nil || r.Format != CompactionFormat {
			return nil, fmt.Errorf("%s: not a %s record: %v", info.Key, CompactionFormat, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// TableObjects lists the objects that hold run's table, in key order: every
// Parquet object under the table's prefix but a source a compaction took
// in whose compacted object is stored (left by a crash before its
// deletion, or stored again by a late writer), so a listing reader reads
// each row once.
func TableObjects(ctx context.Context, st store.ObjectStore, run string, t Table) ([]string, error) {
	var objs []string
	present := map[string]bool{}
	for info, err := range st.List(ctx, keys.TablePrefix(run, t.Name)) {
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", keys.TablePrefix(run, t.Name), err)
		}
		if strings.HasSuffix(info.Key, ".parquet") {
			objs = append(objs, info.Key)
			present[info.Key] = true
		}
	}
	recs, err := records(ctx, st, keys.Run(run)+keys.KindCompactions+"/"+t.Name+"/")
	if err != nil {
		return nil, err
	}
	skip := map[string]bool{}
	for _, r := range recs {
		if present[r.Object.Key] {
			for _, s := range r.Sources {
				skip[s.Key] = true
			}
		}
	}
	out := objs[:0]
	for _, k := range objs {
		if !skip[k] {
			out = append(out, k)
		}
	}
	return out, nil
}

// compacted reads the rows a compaction took in from key, an object it
// deleted, as a Parquet object of those rows alone (its bytes are not the
// deleted object's: the record vouches for the rows, and ref, when not
// nil, must be the claim check the record took in). ok is false when no
// record of key's partition names it.
func compacted(ctx context.Context, st store.ObjectStore, key string, ref *FileRef, want string) (_ *Object, ok bool, err error) {
	run, t, partition, okKey := parseTableKey(key)
	if !okKey {
		return nil, false, nil
	}
	c := codecs[t.Name]
	recs, err := partitionRecords(ctx, st, run, t, partition)
	if err != nil {
		return nil, false, err
	}
	for _, r := range recs {
		s, found := r.source(key)
		if !found {
			continue
		}
		if ref != nil && (ref.SHA256 != s.SHA256 || ref.Rows != s.Rows || ref.Bytes != s.Bytes) {
			return nil, true, fmt.Errorf("%s: the reference (SHA-256 %s, %d rows) is not the object compacted into %s (SHA-256 %s, %d rows)",
				key, ref.SHA256, ref.Rows, r.Object.Key, s.SHA256, s.Rows)
		}
		rows, err := cachedRows(ctx, st, c, r.Object)
		if err != nil {
			return nil, true, err
		}
		data, err := c.slice(rows, s.Offset, s.Rows)
		if err != nil {
			return nil, true, fmt.Errorf("%s (in %s): %w", key, r.Object.Key, err)
		}
		o, err := Parse(key, data, nil, want)
		if err != nil {
			return nil, true, err
		}
		o.verified = true
		return o, true, nil
	}
	return nil, false, nil
}

// parseTableKey splits runs/<run>/<table>/<dir>-NNNN/part-<h>.parquet.
func parseTableKey(key string) (run string, t Table, partition int, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 5 || parts[0] != keys.Root || !strings.HasSuffix(parts[4], ".parquet") {
		return "", Table{}, 0, false
	}
	t, err := LookupTable(parts[2])
	if err != nil {
		return "", Table{}, 0, false
	}
	num, found := strings.CutPrefix(parts[3], t.Dir+"-")
	if !found {
		return "", Table{}, 0, false
	}
	p, err := strconv.Atoi(num)
	if err != nil {
		return "", Table{}, 0, false
	}
	return parts[1], t, p, true
}

// rowCache holds the decoded rows of the compacted objects read last, so
// that reading each of the many claim checks one object took in decodes
// it once.
var rowCache struct {
	sync.Mutex
	keys []string
	rows map[string]any
}

const rowCacheObjects = 4

func cachedRows(ctx context.Context, st store.ObjectStore, c codec, ref FileRef) (any, error) {
	id := ref.Key + "@" + ref.SHA256
	rowCache.Lock()
	rows, ok := rowCache.rows[id]
	rowCache.Unlock()
	if ok {
		return rows, nil
	}
	obj, err := Fetch(ctx, st, ref.Key, &ref, ref.Table)
	if err != nil {
		return nil, err
	}
	if rows, err = c.decode(obj); err != nil {
		return nil, err
	}
	rowCache.Lock()
	defer rowCache.Unlock()
	if rowCache.rows == nil {
		rowCache.rows = map[string]any{}
	}
	if _, ok := rowCache.rows[id]; !ok {
		if len(rowCache.keys) == rowCacheObjects {
			delete(rowCache.rows, rowCache.keys[0])
			rowCache.keys = rowCache.keys[1:]
		}
		rowCache.keys = append(rowCache.keys, id)
		rowCache.rows[id] = rows
	}
	return rows, nil
}

// codec is what compaction does with one table's rows, typed.
type codec struct {
	// build writes the rows of srcs, in order, into one finished object,
	// with the row offset each source starts at (and the total last).
	build  func(run string, partition int, srcs []*Object, o WriterOptions) (*built, []int64, error)
	decode func(o *Object) (any, error)
	// slice writes n rows from off of decoded rows as a Parquet file.
	slice func(rows any, off, n int64) ([]byte, error)
}

type built struct {
	ref   FileRef
	store func(context.Context, store.ObjectStore) (FileRef, error)
	close func()
}

var codecs = map[string]codec{
	TasksTable.Name:        codecOf[TaskRow](),
	AuditsTable.Name:       codecOf[AuditRow](),
	TrajectoriesTable.Name: codecOf[TrajectoryRow](),
	TurnsTable.Name:        codecOf[TurnRow](),
	TokensTable.Name:       codecOf[TokenRow](),
	RoutingTable.Name:      codecOf[RoutingRow](),
	RewardsTable.Name:      codecOf[RewardRow](),
	ValuesTable.Name:       codecOf[ValueRow](),
	MetricsTable.Name:      codecOf[MetricRow](),
	EvalResultsTable.Name:  codecOf[EvalResultRow](),
}

func codecOf[T Row]() codec {
	return codec{
		build: func(run string, partition int, srcs []*Object, o WriterOptions) (*built, []int64, error) {
			w, err := NewWriter[T](o)
			if err != nil {
				return nil, nil, err
			}
			offsets := make([]int64, 0, len(srcs)+1)
			for _, s := range srcs {
				rows, err := DecodeRows[T](s)
				if err == nil {
					offsets = append(offsets, w.Rows())
					err = w.Write(rows)
				}
				if err != nil {
					w.Close()
					return nil, nil, err
				}
			}
			offsets = append(offsets, w.Rows())
			ref, err := w.finish(run, partition)
			if err != nil {
				w.Close()
				return nil, nil, err
			}
			return &built{ref: ref, store: func(ctx context.Context, st store.ObjectStore) (FileRef, error) {
				return w.store(ctx, st, ref)
			}, close: func() { w.Close() }}, offsets, nil
		},
		decode: func(o *Object) (any, error) { return DecodeRows[T](o) },
		slice: func(rows any, off, n int64) ([]byte, error) {
			rs := rows.([]T)
			if off < 0 || n < 0 || off+n > int64(len(rs)) {
				return nil, fmt.Errorf("rows %d..%d of %d", off, off+n, len(rs))
			}
			w, err := NewWriter[T](WriterOptions{})
			if err != nil {
				return nil, err
			}
			defer w.Close()
			if err := w.Write(rs[off : off+n]); err != nil {
				return nil, err
			}
			if err := w.pw.Close(); err != nil {
				return nil, err
			}
			return os.ReadFile(w.f.Name())
		},
	}
}
