// Package storetest is the conformance suite for store.ObjectStore
// implementations and endpoints.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/t1pipe/t1/store"
)

// LargeSize is the size of the multipart round-trip objects: above 64 MiB
// and not a multiple of any part size, so the last part is a short one.
const LargeSize = 64<<20 + 12345

// Run runs the suite. newStore is called once per subtest; stores may share
// a bucket, since each subtest works under its own unique key prefix and
// deletes what it wrote. The multipart tests are skipped with -short.
func Run(t *testing.T, newStore func(t *testing.T) store.ObjectStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.ObjectStore, p string)
	}{
		{"PutGet", testPutGet},
		{"Overwrite", testOverwrite},
		{"Range", testRange},
		{"Stat", testStat},
		{"Metadata", testMetadata},
		{"NotFound", testNotFound},
		{"List", testList},
		{"ListEmptyPrefix", testListEmptyPrefix},
		{"Delete", testDelete},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentConcurrent", testPutIfAbsentConcurrent},
		{"PutIfAbsentConcurrentLarge", testPutIfAbsentConcurrentLarge},
		{"ConcurrentWriters", testConcurrentWriters},
		{"LargeUnknownSize", func(t *testing.T, s store.ObjectStore, p string) { testLarge(t, s, p, -1) }},
		{"LargeKnownSize", func(t *testing.T, s store.ObjectStore, p string) { testLarge(t, s, p, LargeSize) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			p := prefix(t)
			t.Cleanup(func() { cleanup(t, s, p) })
			tc.fn(t, s, p)
		})
	}
}

// prefix is unique per subtest and per run, so reruns against a persistent
// bucket never see a previous run's objects.
func prefix(t *testing.T) string {
	return "storetest/" + strings.ReplaceAll(t.Name(), "/", "_") + "-" + strings.ToLower(rand.Text()[:8]) + "/"
}

func cleanup(t *testing.T, s store.ObjectStore, p string) {
	ctx := context.Background()
	for info, err := range s.List(ctx, p) {
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		if err := s.Delete(ctx, info.Key); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
}

// data returns n deterministic pseudo-random bytes for seed.
func data(seed uint64, n int) []byte {
	b := make([]byte, n)
	_, _ = newSource(seed).Read(b)
	return b
}

func newSource(seed uint64) *mrand.ChaCha8 {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return mrand.NewChaCha8(s)
}

// onlyReader hides io.ReaderAt and io.Seeker, so the store has to stream.
type onlyReader struct{ io.Reader }

func put(t *testing.T, s store.ObjectStore, key string, b []byte) store.ObjectInfo {
	t.Helper()
	info, err := s.Put(t.Context(), key, bytes.NewReader(b), int64(len(b)), store.PutOptions{})
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return info
}

func get(t *testing.T, s store.ObjectStore, key string) ([]byte, store.ObjectInfo) {
	t.Helper()
	rc, info, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	return b, info
}

func testPutGet(t *testing.T, s store.ObjectStore, p string) {
	cases := []struct {
		name string
		body []byte
		size func(b []byte) int64
	}{
		{"known", []byte("hello, object"), func(b []byte) int64 { return int64(len(b)) }},
		{"unknown", data(1, 100_000), func([]byte) int64 { return -1 }},
		{"empty", nil, func([]byte) int64 { return 0 }},
	}
	for _, c := range cases {
		key := p + c.name
		info, err := s.Put(t.Context(), key, onlyReader{bytes.NewReader(c.body)}, c.size(c.body), store.PutOptions{})
		if err != nil {
			t.Fatalf("Put(%s): %v", c.name, err)
		}
		if info.Key != key || info.Size != int64(len(c.body)) || info.ETag == "" {
			t.Errorf("Put(%s) info = %+v, want key %q size %d and an ETag", c.name, info, key, len(c.body))
		}
		got, ginfo := get(t, s, key)
		if !bytes.Equal(got, c.body) {
			t.Errorf("Get(%s) = %d bytes, want %d bytes as put", c.name, len(got), len(c.body))
		}
		if ginfo.Key != key || ginfo.Size != int64(len(c.body)) || ginfo.ETag != info.ETag {
			t.Errorf("Get(%s) info = %+v, want key %q size %d etag %q", c.name, ginfo, key, len(c.body), info.ETag)
		}
	}
	if _, err := s.Put(t.Context(), "", strings.NewReader("x"), 1, store.PutOptions{}); err == nil {
		t.Error("Put with empty key succeeded")
	}
}

func testOverwrite(t *testing.T, s store.ObjectStore, p string) {
	key := p + "obj"
	put(t, s, key, []byte("first version, longer"))
	put(t, s, key, []byte("second"))
	if got, _ := get(t, s, key); string(got) != "second" {
		t.Errorf("after overwrite Get = %q, want %q", got, "second")
	}
	// A short reader must fail the Put and leave the object as it was.
	_, err := s.Put(t.Context(), key, strings.NewReader("abc"), 10, store.PutOptions{})
	if err == nil {
		t.Error("Put with a reader shorter than size succeeded")
	}
	if got, _ := get(t, s, key); string(got) != "second" {
		t.Errorf("after failed Put Get = %q, want %q", got, "second")
	}
}

func testRange(t *testing.T, s store.ObjectStore, p string) {
	key := p + "obj"
	body := data(2, 10_000)
	put(t, s, key, body)
	cases := []struct {
		name           string
		offset, length int64
		want           []byte
	}{
		{"start", 0, 100, body[:100]},
		{"middle", 4321, 1234, body[4321 : 4321+1234]},
		{"tail", 9_900, 100, body[9_900:]},
		{"tail past end", 9_990, 500, body[9_990:]},
		{"to end", 7_000, -1, body[7_000:]},
		{"whole", 0, -1, body},
		{"last byte", 9_999, 1, body[9_999:]},
	}
	for _, c := range cases {
		rc, err := s.GetRange(t.Context(), key, c.offset, c.length)
		if err != nil {
			t.Errorf("GetRange(%s, %d, %d): %v", c.name, c.offset, c.length, err)
			continue
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Errorf("GetRange(%s): read: %v", c.name, err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("GetRange(%s, %d, %d) = %d bytes, want %d bytes of the object", c.name, c.offset, c.length, len(got), len(c.want))
		}
	}
	for _, bad := range [][2]int64{{10_000, 10}, {20_000, -1}, {-1, 10}, {0, 0}, {0, -2}} {
		rc, err := s.GetRange(t.Context(), key, bad[0], bad[1])
		if err == nil {
			rc.Close()
			t.Errorf("GetRange(%d, %d) succeeded, want an error", bad[0], bad[1])
		} else if errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetRange(%d, %d) = %v, want an error other than ErrNotFound", bad[0], bad[1], err)
		}
	}
}

func testStat(t *testing.T, s store.ObjectStore, p string) {
	key := p + "dir/obj.bin"
	body := data(3, 3000)
	pinfo := put(t, s, key, body)
	info, err := s.Stat(t.Context(), key)
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if info.Key != key || info.Size != 3000 || info.ETag != pinfo.ETag || info.LastModified.IsZero() {
		t.Errorf("Stat = %+v, want key %q size 3000 etag %q and a modification time", info, key, pinfo.ETag)
	}
}

func testMetadata(t *testing.T, s store.ObjectStore, p string) {
	opts := store.PutOptions{
		ContentType: "application/vnd.apache.parquet",
		Metadata:    map[string]string{"run": "r-42", "Stage-Name": "rollout", "schema-version": "3"},
	}
	want := map[string]string{"run": "r-42", "stage-name": "rollout", "schema-version": "3"}
	for _, size := range []int64{5, -1} {
		key := fmt.Sprintf("%sobj-%d", p, size)
		info, err := s.Put(t.Context(), key, strings.NewReader("12345"), size, opts)
		if err != nil {
			t.Fatalf("Put(size %d): %v", size, err)
		}
		if info.ContentType != opts.ContentType || !mapsEqual(info.Metadata, want) {
			t.Errorf("Put(size %d) info = %+v, want content type %q metadata %v", size, info, opts.ContentType, want)
		}
		st, err := s.Stat(t.Context(), key)
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		if st.ContentType != opts.ContentType || !mapsEqual(st.Metadata, want) {
			t.Errorf("Stat(size %d) = content type %q metadata %v, want %q %v", size, st.ContentType, st.Metadata, opts.ContentType, want)
		}
		_, gi := get(t, s, key)
		if gi.ContentType != opts.ContentType || !mapsEqual(gi.Metadata, want) {
			t.Errorf("Get(size %d) = content type %q metadata %v, want %q %v", size, gi.ContentType, gi.Metadata, opts.ContentType, want)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func testNotFound(t *testing.T, s store.ObjectStore, p string) {
	key := p + "missing"
	if _, _, err := s.Get(t.Context(), key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(t.Context(), key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.GetRange(t.Context(), key, 0, 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRange(missing) = %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(t.Context(), p+"missing/deeper/key"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat(missing nested) = %v, want ErrNotFound", err)
	}
}

func listKeys(t *testing.T, s store.ObjectStore, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range s.List(t.Context(), prefix) {
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func testList(t *testing.T, s store.ObjectStore, p string) {
	// "-" < "." < "/" in byte order: a listing that walks directories
	// depth-first would put "a/…" before "a-c" and "a.b".
	rel := []string{"b", "a/c/d/e", "ab", "a.b", "a-c", "a/b", "z/y/x", "a/c/f"}
	sizes := map[string]int64{}
	for i, k := range rel {
		put(t, s, p+k, data(uint64(i), i*10))
		sizes[p+k] = int64(i * 10)
	}
	abs := func(ks ...string) []string {
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = p + k
		}
		return out
	}
	cases := []struct {
		prefix string
		want   []string
	}{
		{"", abs("a-c", "a.b", "a/b", "a/c/d/e", "a/c/f", "ab", "b", "z/y/x")},
		{"a", abs("a-c", "a.b", "a/b", "a/c/d/e", "a/c/f", "ab")},
		{"a/", abs("a/b", "a/c/d/e", "a/c/f")},
		{"a/c", abs("a/c/d/e", "a/c/f")},
		{"a/c/d/e", abs("a/c/d/e")},
		{"z/", abs("z/y/x")},
		{"nothing", nil},
	}
	for _, c := range cases {
		got := listKeys(t, s, p+c.prefix)
		if !slices.Equal(got, c.want) {
			t.Errorf("List(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
	for info, err := range s.List(t.Context(), p) {
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != sizes[info.Key] || info.ETag == "" || info.LastModified.IsZero() {
			t.Errorf("List info %+v, want size %d, an ETag and a modification time", info, sizes[info.Key])
		}
	}
	// Stopping early must end the listing cleanly.
	n := 0
	for _, err := range s.List(t.Context(), p) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		break
	}
	if n != 1 {
		t.Errorf("early break after %d items, want 1", n)
	}
}

func testListEmptyPrefix(t *testing.T, s store.ObjectStore, p string) {
	put(t, s, p+"one", []byte("1"))
	put(t, s, p+"two/three", []byte("3"))
	var mine []string
	prev := ""
	for info, err := range s.List(t.Context(), "") {
		if err != nil {
			t.Fatalf("List(\"\"): %v", err)
		}
		if prev != "" && info.Key <= prev {
			t.Errorf("List(\"\") out of order: %q after %q", info.Key, prev)
		}
		prev = info.Key
		if strings.HasPrefix(info.Key, p) {
			mine = append(mine, info.Key)
		}
	}
	if want := []string{p + "one", p + "two/three"}; !slices.Equal(mine, want) {
		t.Errorf("List(\"\") has %q under the test prefix, want %q", mine, want)
	}
}

func testDelete(t *testing.T, s store.ObjectStore, p string) {
	key := p + "x/y/obj"
	put(t, s, key, []byte("gone soon"))
	put(t, s, p+"x/keep", []byte("stays"))
	if err := s.Delete(t.Context(), key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Stat(t.Context(), key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat after Delete = %v, want ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), key); err != nil {
		t.Errorf("Delete of a deleted key = %v, want nil", err)
	}
	if err := s.Delete(t.Context(), p+"never/existed"); err != nil {
		t.Errorf("Delete of a missing key = %v, want nil", err)
	}
	if got, want := listKeys(t, s, p), []string{p + "x/keep"}; !slices.Equal(got, want) {
		t.Errorf("List after Delete = %q, want %q", got, want)
	}
	// The key is free again.
	put(t, s, key, []byte("back"))
	if got, _ := get(t, s, key); string(got) != "back" {
		t.Errorf("Get after re-Put = %q", got)
	}
}

func testPutIfAbsent(t *testing.T, s store.ObjectStore, p string) {
	// A refused body of a few MiB: an S3 server refuses as soon as it has
	// the headers, and may close the connection while the body is still
	// being sent.
	large := strings.Repeat("x", 4<<20)
	for _, tc := range []struct {
		size         int64
		first, other string
	}{{5, "first", "other"}, {-1, "first", "other"}, {int64(len(large)), "first", large}} {
		key := fmt.Sprintf("%sobj-%d", p, tc.size)
		size := tc.size
		if size >= 0 {
			size = int64(len(tc.first))
		}
		if _, err := s.PutIfAbsent(t.Context(), key, strings.NewReader(tc.first), size, store.PutOptions{}); err != nil {
			t.Fatalf("PutIfAbsent(new, size %d): %v", size, err)
		}
		if size >= 0 {
			size = int64(len(tc.other))
		}
		_, err := s.PutIfAbsent(t.Context(), key, strings.NewReader(tc.other), size, store.PutOptions{})
		if !errors.Is(err, store.ErrExists) {
			t.Errorf("PutIfAbsent(existing, size %d) = %v, want ErrExists", size, err)
		}
		if got, _ := get(t, s, key); string(got) != tc.first {
			t.Errorf("after refused PutIfAbsent Get = %q, want %q", got, tc.first)
		}
	}
}

func testPutIfAbsentConcurrent(t *testing.T, s store.ObjectStore, p string) {
	const n = 8
	for _, size := range []int64{-1, 1} {
		key := fmt.Sprintf("%sobj-%d", p, size)
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				body := fmt.Sprint(i)
				sz := size
				if sz > 0 {
					sz = int64(len(body))
				}
				_, errs[i] = s.PutIfAbsent(t.Context(), key, strings.NewReader(body), sz, store.PutOptions{})
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("size %d: creators %d and %d both succeeded", size, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, store.ErrExists):
				t.Errorf("size %d: creator %d: %v, want ErrExists", size, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("size %d: no creator succeeded", size)
		}
		if got, _ := get(t, s, key); string(got) != fmt.Sprint(winner) {
			t.Errorf("size %d: object = %q, want the winner's %q", size, got, fmt.Sprint(winner))
		}
	}
}

// testPutIfAbsentConcurrentLarge races creators whose objects need a
// multipart upload, where the condition must hold at completion.
func testPutIfAbsentConcurrentLarge(t *testing.T, s store.ObjectStore, p string) {
	if testing.Short() {
		t.Skip("multipart round trip skipped in short mode")
	}
	const n, size = 4, 16<<20 + 1
	key := p + "obj"
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			sz := int64(-1)
			if i%2 == 1 {
				sz = size
			}
			r := onlyReader{io.LimitReader(newSource(uint64(200+i)), size)}
			_, errs[i] = s.PutIfAbsent(t.Context(), key, r, sz, store.PutOptions{})
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("creators %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrExists):
			t.Errorf("creator %d: %v, want ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no creator succeeded")
	}
	got, _ := get(t, s, key)
	if !bytes.Equal(got, data(uint64(200+winner), size)) {
		t.Errorf("object differs from the winner's data")
	}
}

func testConcurrentWriters(t *testing.T, s store.ObjectStore, p string) {
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			b := data(uint64(100+i), 256<<10)
			_, errs[i] = s.Put(t.Context(), fmt.Sprintf("%sw%02d", p, i), bytes.NewReader(b), int64(len(b)), store.PutOptions{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	for i := range n {
		got, _ := get(t, s, fmt.Sprintf("%sw%02d", p, i))
		if !bytes.Equal(got, data(uint64(100+i), 256<<10)) {
			t.Errorf("object of writer %d differs from what it wrote", i)
		}
	}
	if got := listKeys(t, s, p); len(got) != n {
		t.Errorf("List = %d keys, want %d", len(got), n)
	}
}

func testLarge(t *testing.T, s store.ObjectStore, p string, size int64) {
	if testing.Short() {
		t.Skip("multipart round trip skipped in short mode")
	}
	key := p + "large.bin"
	src := newSource(7)
	h := sha256.New()
	r := onlyReader{io.TeeReader(io.LimitReader(src, LargeSize), h)}
	info, err := s.Put(t.Context(), key, r, size, store.PutOptions{})
	if err != nil {
		t.Fatalf("Put(%d bytes, size %d): %v", LargeSize, size, err)
	}
	if info.Size != LargeSize {
		t.Errorf("Put info size = %d, want %d", info.Size, LargeSize)
	}
	want := h.Sum(nil)

	rc, ginfo, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer rc.Close()
	h.Reset()
	n, err := io.Copy(h, rc)
	if err != nil {
		t.Fatalf("Get: read: %v", err)
	}
	if n != LargeSize || ginfo.Size != LargeSize {
		t.Errorf("Get = %d bytes (info size %d), want %d", n, ginfo.Size, LargeSize)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		t.Errorf("sha256 of stored object = %x, want %x", got, want)
	}

	// A range across the part boundary at 16 MiB.
	const off = 16<<20 - 100
	full := data(7, off+200)
	rrc, err := s.GetRange(t.Context(), key, off, 200)
	if err != nil {
		t.Fatalf("GetRange: %v", err)
	}
	defer rrc.Close()
	got, err := io.ReadAll(rrc)
	if err != nil || !bytes.Equal(got, full[off:]) {
		t.Errorf("GetRange across a part boundary differs from the source (err %v)", err)
	}
}
