package schemas

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
)

// putRaw writes a Parquet file of rows with the given metadata straight to
// the store, as a foreign or future writer would.
func putRaw[T any](t *testing.T, st store.ObjectStore, key string, rows []T, meta map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	opts := []parquet.WriterOption{parquet.Compression(&zstd.Codec{Level: zstd.SpeedDefault})}
	for k, v := range meta {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	w := parquet.NewGenericWriter[T](&buf, opts...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), key, bytes.NewReader(buf.Bytes()), int64(buf.Len()), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q lacks %q", err, p)
		}
	}
}

func TestSchemaMetadataChecks(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rows := sampleRows[MetricRow](1, 3)

	key := "bad/future.parquet"
	putRaw(t, st, key, rows, map[string]string{MetaTable: "metrics", MetaVersion: "2.0"})
	_, err := ReadRows[MetricRow](ctx, st, key, nil)
	wantErr(t, err, key, "schema version 2.0", "major version 1")
	if !errors.Is(err, ErrSchema) {
		t.Fatalf("%v does not wrap ErrSchema", err)
	}

	// A newer minor version of a known major is readable.
	key = "bad/minor.parquet"
	putRaw(t, st, key, rows, map[string]string{MetaTable: "metrics", MetaVersion: "1.7"})
	if got, err := ReadRows[MetricRow](ctx, st, key, nil); err != nil || len(got) != 3 {
		t.Fatalf("minor version: %d rows, %v", len(got), err)
	}

	key = "bad/anonymous.parquet"
	putRaw(t, st, key, rows, nil)
	wantErr(t, second(ReadRows[MetricRow](ctx, st, key, nil)), key, "no t1.table")

	key = "bad/other.parquet"
	putRaw(t, st, key, rows, map[string]string{MetaTable: "metrics", MetaVersion: "1.0"})
	wantErr(t, second(ReadRows[TokenRow](ctx, st, key, nil)), key, `holds table "metrics", want "tokens"`)
	wantErr(t, second(Fetch(ctx, st, key, nil, "rewards")), key, `want "rewards"`)

	key = "bad/garbled-version.parquet"
	putRaw(t, st, key, rows, map[string]string{MetaTable: "metrics", MetaVersion: "one"})
	wantErr(t, second(ReadRows[MetricRow](ctx, st, key, nil)), key, `"one"`)
}

func second[T any](_ T, err error) error { return err }

func TestTruncatedAndCorrupted(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rows := sampleRows[TokenRow](2, 9)
	ref, err := WriteTable(ctx, st, "bad", 1, rows, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := st.Get(ctx, ref.Key)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(rc)
	rc.Close()
	data := buf.Bytes()

	for _, n := range []int{0, 3, len(data) / 2, len(data) - 1} {
		_, err := Parse("trunc.parquet", data[:n], nil, "")
		wantErr(t, err, "trunc.parquet", "truncated or corrupted")
	}
	// With the reference, any change is caught by size or hash.
	wantErr(t, second(Parse(ref.Key, data[:len(data)-1], &ref, "")), ref.Key, "bytes, the reference says")
	flipped := bytes.Clone(data)
	flipped[len(flipped)/2] ^= 0xff
	wantErr(t, second(Parse(ref.Key, flipped, &ref, "")), ref.Key, "SHA-256")

	// Without it, damage inside a compressed page is caught when decoding
	// (zstd frames carry a checksum); columnar's tests read it with
	// arrow-go.
	for i := 1; i < 8; i++ {
		bad := bytes.Clone(data)
		bad[len(bad)*i/10] ^= 0x5a
		o, err := Parse("damaged.parquet", bad, nil, "")
		if err != nil {
			wantErr(t, err, "damaged.parquet")
			continue
		}
		_, rerr := DecodeRows[TokenRow](o)
		wantErr(t, rerr, "damaged.parquet")
	}

	// Objects t1 wrote carry their SHA-256 in the store's metadata, so a
	// reader without a FileRef still notices replaced bytes.
	if _, err := st.Put(ctx, "bad/swapped.parquet", bytes.NewReader(flipped), int64(len(flipped)),
		store.PutOptions{Metadata: map[string]string{"sha256": ref.SHA256}}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, second(Fetch(ctx, st, "bad/swapped.parquet", nil, "")), "bad/swapped.parquet", "SHA-256", "metadata")

	_, err = ReadRows[TokenRow](ctx, st, keys.TablePrefix("bad", TokensTable.Name)+"iter=0001/missing.parquet", nil)
	wantErr(t, err, "missing.parquet", "not found")
}

func TestTokensAndRoutingAgree(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rng := rand.New(rand.NewPCG(4, 4))
	var toks []TokenRow
	var routes []RoutingRow
	for c := range 3 {
		n := 5 + c
		toks = append(toks, TokenRow{Run: "al", TaskID: "t1", Attempt: 0, Chunk: int32(c), TokenIDs: make([]int32, n),
			LogProbs: make([]float32, n), LossMask: make([]bool, n)})
		rec, err := routing.Uniform(rng, n, 4, 2, 16)
		if err != nil {
			t.Fatal(err)
		}
		row, err := NewRoutingRow("al", "t1", 0, c, rec, routing.Auto)
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, row)
	}
	tref, err := WriteTable(ctx, st, "al", 0, toks, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rref, err := WriteTable(ctx, st, "al", 0, routes, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gotT, err := ReadRows[TokenRow](ctx, st, tref.Key, &tref)
	if err != nil {
		t.Fatal(err)
	}
	gotR, err := ReadRows[RoutingRow](ctx, st, rref.Key, &rref)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckAligned(tref.Key, gotT, rref.Key, gotR); err != nil {
		t.Fatal(err)
	}
	for i, r := range gotR {
		rec, err := r.Decode()
		if err != nil || rec.Tokens != len(toks[i].TokenIDs) {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	full := gotT[1].TokenIDs
	gotT[1].TokenIDs = full[:4]
	wantErr(t, CheckAligned(tref.Key, gotT, rref.Key, gotR), tref.Key, rref.Key, "chunk 1", "holds 4 tokens", "routes 6")
	gotT[1].TokenIDs = full
	wantErr(t, CheckAligned(tref.Key, gotT[:2], rref.Key, gotR), tref.Key, rref.Key, "chunk 2")
	wantErr(t, CheckAligned(tref.Key, gotT, rref.Key, gotR[:2]), tref.Key, rref.Key, "no routing")
}
