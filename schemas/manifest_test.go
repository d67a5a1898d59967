package schemas

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/t1pipe/t1/schemas/routing"
)

// batch writes a small consistent batch and returns its manifest.
func batch(t *testing.T) *BatchManifest {
	t.Helper()
	ctx := context.Background()
	st := openStore(t)
	rng := rand.New(rand.NewPCG(11, 12))
	dims := ModelDims{Vocab: 512, Layers: 4, TopK: 2, Experts: 16}
	var toks []TokenRow
	var routes []RoutingRow
	var vals []ValueRow
	for c := range 4 {
		n := 3 + c
		toks = append(toks, TokenRow{Run: "mf", TaskID: "task-a", Chunk: int32(c), TokenIDs: make([]int32, n)})
		rec, err := routing.Correlated(rng, n, dims.Layers, dims.TopK, dims.Experts, 0.8, 1.1)
		if err != nil {
			t.Fatal(err)
		}
		row, err := NewRoutingRow("mf", "task-a", 0, c, rec, routing.Packed)
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, row)
		vals = append(vals, ValueRow{Run: "mf", TaskID: "task-a", Chunk: int32(c), Values: make([]float32, n)})
	}
	m := &BatchManifest{Format: ManifestFormat, Run: "mf", Iteration: 2, PolicyVersion: 2, Model: dims,
		RoutingEncoding: "packed", RoutingDType: routing.DType(dims.Experts), SchemaVersions: map[string]string{},
		Chunks: 4, Tokens: 18, Attempts: 1}
	add := func(ref FileRef, err error) FileRef {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		m.SchemaVersions[ref.Table] = ref.SchemaVersion
		return ref
	}
	m.TokenFiles = []FileRef{add(WriteTable(ctx, st, "mf", 2, toks, WriterOptions{}))}
	m.RoutingFiles = []FileRef{add(WriteTable(ctx, st, "mf", 2, routes, WriterOptions{}))}
	m.ValueFiles = []FileRef{add(WriteTable(ctx, st, "mf", 2, vals, WriterOptions{}))}
	m.RewardFiles = []FileRef{add(WriteTable(ctx, st, "mf", 2, []RewardRow{{Run: "mf", TaskID: "task-a"}}, WriterOptions{}))}
	m.TrajectoryFiles = []FileRef{add(WriteTable(ctx, st, "mf", 2, []TrajectoryRow{{Run: "mf", TaskID: "task-a"}}, WriterOptions{}))}
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	m := batch(t)
	ref, err := WriteManifest(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(ctx, st, ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.Chunks != 4 || got.RoutingFiles[0] != m.RoutingFiles[0] || got.Model != m.Model {
		t.Fatalf("read back %+v", got)
	}
	// A trainer's path: read routing rows and view the packed ids.
	rows, err := ReadRows[RoutingRow](ctx, st, got.RoutingFiles[0].Key, &got.RoutingFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		rec, err := r.Decode()
		if err != nil {
			t.Fatal(err)
		}
		view := r.Record[r.IDsOffset : int(r.IDsOffset)+rec.RawBytes()]
		if string(view) != string(rec.IDs) {
			t.Fatalf("chunk %d: ids at ids_offset differ from the decoded record", r.Chunk)
		}
	}
	bad := ref
	bad.SHA256 = ref.SHA256[:63] + "0"
	if bad.SHA256 == ref.SHA256 {
		bad.SHA256 = ref.SHA256[:63] + "1"
	}
	wantErr(t, second(ReadManifest(ctx, st, bad)), ref.Key, "SHA-256")
}

func TestManifestValidate(t *testing.T) {
	base := batch(t)
	for _, tc := range []struct {
		name  string
		edit  func(m *BatchManifest)
		parts []string
	}{
		{"format", func(m *BatchManifest) { m.Format = 9 }, []string{"format 9"}},
		{"chunks", func(m *BatchManifest) { m.Chunks = 5 }, []string{"5 chunks", "token files hold 4"}},
		{"routing rows", func(m *BatchManifest) { m.RoutingFiles[0].Rows = 3 }, []string{"routing files 3"}},
		{"wrong table", func(m *BatchManifest) { m.RoutingFiles[0] = m.TokenFiles[0] }, []string{"routing_files[0]", `want "routing"`}},
		{"future major", func(m *BatchManifest) { m.TokenFiles[0].SchemaVersion = "2.0" }, []string{"token_files[0]", "major version 1"}},
		{"encoding", func(m *BatchManifest) { m.RoutingEncoding = "delta" }, []string{`routing_encoding "delta"`}},
		{"dtype", func(m *BatchManifest) { m.RoutingDType = "<u2" }, []string{`"<u1" for 16 experts`}},
		{"topk", func(m *BatchManifest) { m.Model.TopK = 17 }, []string{"top_k 17 exceeds"}},
		{"sha", func(m *BatchManifest) { m.ValueFiles[0].SHA256 = "x" }, []string{"value_files[0]", "64 hex"}},
		{"attempts", func(m *BatchManifest) { m.Attempts = 2 }, []string{"2 attempts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := *base
			m.TokenFiles = append([]FileRef{}, base.TokenFiles...)
			m.RoutingFiles = append([]FileRef{}, base.RoutingFiles...)
			m.ValueFiles = append([]FileRef{}, base.ValueFiles...)
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			tc.edit(&m)
			wantErr(t, m.Validate(), tc.parts...)
		})
	}
}
