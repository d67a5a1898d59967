// Package digest fingerprints a run: every table row, object and event id
// that the run's event log vouches for, canonicalised so that two runs
// made from the same configuration and seed — in one process or many,
// uninterrupted or crashed and resumed — have equal digests.
//
// Only what the log points to counts. Table rows come from the FileRefs
// and objects from the ObjectRefs that the run's event payloads carry
// (claim checks), each verified against its size and SHA-256; objects
// under runs/<run>/ that no event names (left by a crash between a write
// and its event, or by a redelivery that lost the race) are not part of
// the run and are never listed.
//
// Canonical forms:
//   - a table is the multiset of its rows, each row encoded column by
//     column (schemas.Canonical: leaf path, repetition and definition
//     levels, and the exact bytes of every value) without the table's
//     wall-clock columns (schemas.Table.WallClock); rows are sorted by the
//     SHA-256 of that encoding and the table's hash is the SHA-256 of the
//     sorted row hashes;
//   - an event type is the sorted list of its event ids (ids derive from
//     causes, never from times or payload bytes);
//   - an object kind (bundles, policy, critic, snapshots) is the sorted list
//     of its keys with a content hash: the object's SHA-256, for a
//     checkpoint its weights' (model.safetensors', or a sharded one's
//     index and every shard the index names), for a snapshot the hash of
//     its tar entries without their times.
//
// Batch manifests are not digested as objects: a manifest lists claim
// checks whose SHA-256 covers the wall-clock columns of the files it
// names, and those files are digested as tables already.
package digest

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// WallClock lists the columns left out of table digests as sorted
// table.column names: those each table declares as wall-clock
// measurements (schemas.Table.WallClock), which no seed fixes.
func WallClock() []string {
	var out []string
	for _, t := range schemas.Tables() {
		for _, c := range t.WallClock() {
			out = append(out, t.Name+"."+c)
		}
	}
	sort.Strings(out)
	return out
}

// attemptColumns identify one attempt, as the rollout stage's attempt
// marker does; two rows of a table with equal values there are the same
// attempt stored twice.
var attemptColumns = map[string][]string{
	schemas.TrajectoriesTable.Name: {"task_id", "attempt", "purpose", "suite", "iteration", "policy_version"},
	schemas.RewardsTable.Name:      {"task_id", "attempt", "purpose", "iteration", "policy_version"},
}

// Table is the digest of one table.
type Table struct {
	Name   string `json:"table"`
	Files  int    `json:"files"`
	Rows   int64  `json:"rows"`
	SHA256 string `json:"sha256"`
}

// Events is the digest of one event type.
type Events struct {
	Type   string `json:"type"`
	Count  int    `json:"count"`
	SHA256 string `json:"sha256"`
}

// Objects is the digest of one kind of non-Parquet object.
type Objects struct {
	Kind   string `json:"kind"`
	Count  int    `json:"count"`
	SHA256 string `json:"sha256"`
}

// Duplicates counts work stored more than once; each must be 0.
type Duplicates struct {
	// Trajectories and Rewards count rows beyond the first for one attempt.
	Trajectories int `json:"trajectories"`
	Rewards      int `json:"rewards"`
	// PolicyVersions counts announcements (policy.updated, sft.completed)
	// beyond the first for one policy version.
	PolicyVersions int `json:"policy_versions"`
	// Events counts event ids stored more than once (a publish that came
	// after the stream's dedup window).
	Events int `json:"events"`
}

// Total is the sum of the counts.
func (d Duplicates) Total() int { return d.Trajectories + d.Rewards + d.PolicyVersions + d.Events }

// Digest is a run's fingerprint.
type Digest struct {
	Run        string     `json:"run"`
	SHA256     string     `json:"sha256"` // over everything below
	Tables     []Table    `json:"tables"`
	Events     []Events   `json:"events"`
	Objects    []Objects  `json:"objects"`
	Duplicates Duplicates `json:"duplicates"`
}

// Diff lists, one line each, the parts where d and o differ; it is empty
// when the digests are equal.
func (d *Digest) Diff(o *Digest) []string {
	var out []string
	lines := func(x *Digest) map[string]string {
		m := map[string]string{}
		for _, t := range x.Tables {
			m["table "+t.Name] = fmt.Sprintf("%d rows %s", t.Rows, t.SHA256[:16])
		}
		for _, e := range x.Events {
			m["events "+e.Type] = fmt.Sprintf("%d ids %s", e.Count, e.SHA256[:16])
		}
		for _, b := range x.Objects {
			m["objects "+b.Kind] = fmt.Sprintf("%d objects %s", b.Count, b.SHA256[:16])
		}
		m["duplicates"] = fmt.Sprintf("%+v", x.Duplicates)
		return m
	}
	a, b := lines(d), lines(o)
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if a[k] != b[k] {
			out = append(out, fmt.Sprintf("%s: %s | %s", k, orNone(a[k]), orNone(b[k])))
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Compute reads run's events from l and the artifacts they name from st
// and returns the run's digest. A claim check whose object is missing or
// does not match its size or SHA-256 is an error naming the key.
func Compute(ctx context.Context, l *engine.Log, st store.ObjectStore, run string) (*Digest, error) {
	if err := keys.ValidRun(run); err != nil {
		return nil, err
	}
	c := collector{files: map[string]schemas.FileRef{}, objects: map[string]schemas.ObjectRef{},
		ids: map[string][]string{}, versions: map[int64]int{}}
	err := l.Replay(ctx, []string{engine.Subject(run, ">")}, engine.ReplayFrom{}, c.event)
	if err != nil {
		return nil, fmt.Errorf("digest %s: %w", run, err)
	}
	if len(c.ids) == 0 {
		return nil, fmt.Errorf("digest %s: the log holds no event of this run", run)
	}
	d := &Digest{Run: run}
	for typ, ids := range c.ids {
		sort.Strings(ids)
		h := sha256.New()
		for i, id := range ids {
			if i > 0 && ids[i-1] == id {
				d.Duplicates.Events++
			}
			fmt.Fprintln(h, id)
		}
		d.Events = append(d.Events, Events{Type: typ, Count: len(ids), SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	sort.Slice(d.Events, func(i, j int) bool { return d.Events[i].Type < d.Events[j].Type })
	for _, n := range c.versions {
		d.Duplicates.PolicyVersions += n - 1
	}
	if err := c.tables(ctx, st, d); err != nil {
		return nil, fmt.Errorf("digest %s: %w", run, err)
	}
	if err := c.objectKinds(ctx, st, d); err != nil {
		return nil, fmt.Errorf("digest %s: %w", run, err)
	}
	h := sha256.New()
	for _, t := range d.Tables {
		fmt.Fprintf(h, "table %s %d %s\n", t.Name, t.Rows, t.SHA256)
	}
	for _, e := range d.Events {
		fmt.Fprintf(h, "events %s %d %s\n", e.Type, e.Count, e.SHA256)
	}
	for _, o := range d.Objects {
		fmt.Fprintf(h, "objects %s %d %s\n", o.Kind, o.Count, o.SHA256)
	}
	fmt.Fprintf(h, "duplicates %+v\n", d.Duplicates)
	d.SHA256 = hex.EncodeToString(h.Sum(nil))
	return d, nil
}

// collector gathers what a run's events say.
type collector struct {
	files    map[string]schemas.FileRef   // by key
	objects  map[string]schemas.ObjectRef // by key
	ids      map[string][]string          // event ids by type
	versions map[int64]int                // announcements per policy version
}

func (c *collector) event(ev engine.Event) error {
	c.ids[ev.Type] = append(c.ids[ev.Type], ev.ID)
	switch ev.Type {
	case schemas.PolicyUpdated, schemas.SFTCompleted:
		var p struct {
			PolicyVersion int64 `json:"policy_version"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return fmt.Errorf("event %s (%s): %w", ev.ID, ev.Type, err)
		}
		c.versions[p.PolicyVersion]++
	}
	if len(ev.Payload) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(ev.Payload, &v); err != nil {
		return fmt.Errorf("event %s (%s): %w", ev.ID, ev.Type, err)
	}
	return c.refs(ev, v)
}

// refs finds the claim checks in a decoded payload: any object with a key
// and a SHA-256 is one, a FileRef when it names a table. Walking the
// payload rather than listing fields per type keeps new event types
// covered.
func (c *collector) refs(ev engine.Event, v any) error {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if err := c.refs(ev, e); err != nil {
				return err
			}
		}
	case map[string]any:
		key, _ := x["key"].(string)
		sum, _ := x["sha256"].(string)
		if key != "" && sum != "" {
			raw, _ := json.Marshal(x)
			if _, ok := x["table"]; ok {
				var f schemas.FileRef
				if err := json.Unmarshal(raw, &f); err != nil {
					return fmt.Errorf("event %s (%s): file reference: %w", ev.ID, ev.Type, err)
				}
				if old, ok := c.files[key]; ok && old != f {
					return fmt.Errorf("event %s (%s): %s referenced as %+v and as %+v", ev.ID, ev.Type, key, old, f)
				}
				c.files[key] = f
				return nil
			}
			var o schemas.ObjectRef
			if err := json.Unmarshal(raw, &o); err != nil {
				return fmt.Errorf("event %s (%s): object reference: %w", ev.ID, ev.Type, err)
			}
			if old, ok := c.objects[key]; ok && old != o {
				return fmt.Errorf("event %s (%s): %s referenced as %+v and as %+v", ev.ID, ev.Type, key, old, o)
			}
			c.objects[key] = o
			return nil
		}
		for _, e := range x {
			if err := c.refs(ev, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// tableState accumulates one table.
type tableState struct {
	files    int
	rows     [][32]byte
	attempts map[string]int
}

func (c *collector) tables(ctx context.Context, st store.ObjectStore, d *Digest) error {
	byTable := map[string]*tableState{}
	for _, t := range schemas.Tables() {
		byTable[t.Name] = &tableState{attempts: map[string]int{}}
	}
	keys := make([]string, 0, len(c.files))
	for k := range c.files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		ref := c.files[key]
		o, err := schemas.Fetch(ctx, st, key, &ref, ref.Table)
		if err != nil {
			return err
		}
		ts := byTable[o.Table.Name]
		ts.files++
		if err := rowHashes(o, ts); err != nil {
			return err
		}
	}
	for _, t := range schemas.Tables() {
		ts := byTable[t.Name]
		slices.SortFunc(ts.rows, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
		h := sha256.New()
		for _, r := range ts.rows {
			h.Write(r[:])
		}
		d.Tables = append(d.Tables, Table{Name: t.Name, Files: ts.files, Rows: int64(len(ts.rows)), SHA256: hex.EncodeToString(h.Sum(nil))})
		dups := 0
		for _, n := range ts.attempts {
			dups += n - 1
		}
		switch t.Name {
		case schemas.TrajectoriesTable.Name:
			d.Duplicates.Trajectories = dups
		case schemas.RewardsTable.Name:
			d.Duplicates.Rewards = dups
		}
	}
	return nil
}

// rowHashes adds the canonical hash of every row of o to ts.
func rowHashes(o *schemas.Object, ts *tableState) error {
	pf, err := parquet.OpenFile(bytes.NewReader(o.Data), int64(len(o.Data)))
	if err != nil {
		return fmt.Errorf("%s: %w", o.Key, err)
	}
	canon := schemas.NewCanonical(o.Table, pf.Schema())
	cols := attemptColumns[o.Table.Name]
	ident := make([]int, len(cols))
	for i, c := range cols {
		if ident[i] = canon.Column(c); ident[i] < 0 {
			return fmt.Errorf("%s: table %s has no column %s, which identifies an attempt", o.Key, o.Table.Name, c)
		}
	}
	var enc []byte
	buf := make([]parquet.Row, 64)
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				enc = canon.Append(enc[:0], row)
				ts.rows = append(ts.rows, sha256.Sum256(enc))
				if len(cols) > 0 {
					ts.attempts[attemptKey(row, cols, ident)]++
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rows.Close()
				return fmt.Errorf("%s: %w", o.Key, err)
			}
		}
		rows.Close()
	}
	return nil
}

func attemptKey(row parquet.Row, cols []string, ident []int) string {
	var b strings.Builder
	for i, c := range cols {
		for _, v := range row {
			if v.Column() == ident[i] {
				fmt.Fprintf(&b, "%s=%q;", c, v.Bytes())
				break
			}
		}
	}
	return b.String()
}

// objectKinds digests the non-Parquet objects by kind (keys.Kind; "other"
// for a key outside the layout).
func (c *collector) objectKinds(ctx context.Context, st store.ObjectStore, d *Digest) error {
	byKind := map[string][]string{}
	for key, ref := range c.objects {
		kind := cmp.Or(keys.Kind(key), "other")
		if kind == keys.KindBatches {
			continue // see the package documentation
		}
		sum, err := objectHash(ctx, st, kind, ref)
		if err != nil {
			return err
		}
		byKind[kind] = append(byKind[kind], key+" "+sum)
	}
	for kind, lines := range byKind {
		sort.Strings(lines)
		h := sha256.New()
		for _, l := range lines {
			fmt.Fprintln(h, l)
		}
		d.Objects = append(d.Objects, Objects{Kind: kind, Count: len(lines), SHA256: hex.EncodeToString(h.Sum(nil))})
	}
	sort.Slice(d.Objects, func(i, j int) bool { return d.Objects[i].Kind < d.Objects[j].Kind })
	return nil
}

// objectHash verifies ref against the stored bytes and returns the
// object's content hash for the digest.
func objectHash(ctx context.Context, st store.ObjectStore, kind string, ref schemas.ObjectRef) (string, error) {
	if kind == keys.KindPolicy || kind == keys.KindCritic {
		return checkpointHash(ctx, st, ref)
	}
	if kind != keys.KindSnapshots {
		return claimed(ctx, st, ref.Key, ref, nil)
	}
	var data bytes.Buffer
	if _, err := claimed(ctx, st, ref.Key, ref, &data); err != nil {
		return "", err
	}
	return tarHash(ref.Key, &data)
}

// checkpointHash is a checkpoint's content hash. Its claim check names
// its prefix and the SHA-256 of its weights: model.safetensors, or for
// sharded weights the index (checkpoint.Ref), whose every shard is
// then hashed too, so that the digest covers all the weights however
// they are stored. A shard the index names that is not there fails the
// digest.
func checkpointHash(ctx context.Context, st store.ObjectStore, ref schemas.ObjectRef) (string, error) {
	key := path.Join(ref.Key, moe.WeightsFile)
	sum, err := claimed(ctx, st, key, ref, nil)
	if !errors.Is(err, store.ErrNotFound) {
		return sum, err
	}
	key = path.Join(ref.Key, moe.WeightsIndexFile)
	var index bytes.Buffer
	sum, err = claimed(ctx, st, key, ref, &index)
	if errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("checkpoint %s: neither %s nor %s is there", ref.Key, moe.WeightsFile, moe.WeightsIndexFile)
	}
	if err != nil {
		return "", err
	}
	shards, err := moe.WeightShards(index.Bytes())
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", moe.WeightsIndexFile, sum)
	for _, name := range shards {
		skey := path.Join(ref.Key, name)
		rc, _, err := st.Get(ctx, skey)
		if err != nil {
			return "", fmt.Errorf("checkpoint %s: shard %s of its index: %w", ref.Key, name, err)
		}
		sh := sha256.New()
		_, err = io.Copy(sh, rc)
		rc.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", skey, err)
		}
		fmt.Fprintf(h, "%s %x\n", name, sh.Sum(nil))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// claimed reads key, checks its size and SHA-256 against ref's and
// returns the SHA-256, copying the bytes into data unless it is nil. An
// absent object is store.ErrNotFound.
func claimed(ctx context.Context, st store.ObjectStore, key string, ref schemas.ObjectRef, data *bytes.Buffer) (string, error) {
	rc, _, err := st.Get(ctx, key)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	defer rc.Close()
	h := sha256.New()
	var w io.Writer = h
	if data != nil {
		w = io.MultiWriter(h, data)
	}
	n, err := io.Copy(w, rc)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if n != ref.Bytes || sum != ref.SHA256 {
		return "", fmt.Errorf("%s: %d bytes with SHA-256 %s, the reference says %d bytes with %s", key, n, sum, ref.Bytes, ref.SHA256)
	}
	return sum, nil
}

// tarHash hashes a snapshot's entries — name, type, mode, link target and
// content — without their modification times, which record when the
// attempt's commands ran, and without the stat cache of git indexes
// (gitIndex).
func tarHash(key string, r io.Reader) (string, error) {
	h := sha256.New()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return "", fmt.Errorf("%s: snapshot: %w", key, err)
		}
		fmt.Fprintf(h, "%q %c %o %q %d ", hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Linkname, hdr.Size)
		for k, v := range sortedPAX(hdr) {
			fmt.Fprintf(h, "%q=%q ", k, v)
		}
		if path.Base(hdr.Name) == "index" && path.Base(path.Dir(hdr.Name)) == ".git" {
			data, err := io.ReadAll(tr)
			if err != nil {
				return "", fmt.Errorf("%s: snapshot %s: %w", key, hdr.Name, err)
			}
			sum := sha256.Sum256(gitIndex(data))
			h.Write(sum[:])
		} else if err := copyHash(h, tr); err != nil {
			return "", fmt.Errorf("%s: snapshot %s: %w", key, hdr.Name, err)
		}
		h.Write([]byte{'\n'})
	}
}

// sortedPAX yields the entry's PAX records other than times, in key
// order (whiteouts and extended attributes matter; times do not).
func sortedPAX(hdr *tar.Header) func(func(string, string) bool) {
	return func(yield func(string, string) bool) {
		keys := make([]string, 0, len(hdr.PAXRecords))
		for k := range hdr.PAXRecords {
			if k != "mtime" && k != "atime" && k != "ctime" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !yield(k, hdr.PAXRecords[k]) {
				return
			}
		}
	}
}

func copyHash(h hash.Hash, r io.Reader) error {
	sum := sha256.New()
	if _, err := io.Copy(sum, r); err != nil {
		return err
	}
	h.Write(sum.Sum(nil))
	return nil
}

// gitIndex returns a git index (versions 2 and 3) with each entry's stat
// cache — change and modification times, device, inode, owner and size,
// which git records only to notice edits quickly — zeroed and the trailing
// checksum over them dropped; paths, modes, blob ids, flags and
// extensions stay. An index it cannot parse is returned unchanged.
func gitIndex(data []byte) []byte {
	if len(data) < 12+20 || string(data[:4]) != "DIRC" {
		return data
	}
	ver := binary.BigEndian.Uint32(data[4:8])
	if ver != 2 && ver != 3 {
		return data
	}
	out := slices.Clone(data[:len(data)-20])
	n := int(binary.BigEndian.Uint32(data[8:12]))
	off := 12
	for range n {
		const fixed = 62 // 10 stat words, mode among them, a SHA-1 and the flags
		if off+fixed > len(out) {
			return data
		}
		mode := binary.BigEndian.Uint32(out[off+24 : off+28])
		clear(out[off : off+40])
		binary.BigEndian.PutUint32(out[off+24:off+28], mode)
		flags := binary.BigEndian.Uint16(out[off+60 : off+62])
		name := off + fixed
		if flags&0x4000 != 0 { // extended flags follow
			name += 2
		}
		end := bytes.IndexByte(out[min(name, len(out)):], 0)
		if end < 0 {
			return data
		}
		entry := name + end - off
		off += (entry + 8) &^ 7 // NUL-padded to a multiple of 8, at least one NUL
	}
	return out
}
