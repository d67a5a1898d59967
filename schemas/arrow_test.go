package schemas_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/columnar"
)

// The tables read with arrow-go (package columnar) as they were written:
// every value of every column, streamed as record batches, and conformed
// to this build's schema.
func TestArrowReadsEveryTable(t *testing.T) {
	t.Parallel()
	const n = 13
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"tasks", func(t *testing.T) { arrowRoundTrip(t, schemas.RoundTripRows[schemas.TaskRow](1, n)) }},
		{"audits", func(t *testing.T) { arrowRoundTrip(t, schemas.RoundTripRows[schemas.AuditRow](2, n)) }},
		{"trajectories", func(t *testing.T) { arrowRoundTrip(t, schemas.RoundTripRows[schemas.TrajectoryRow](3, n)) }},
		{"turns", func(t *testing.T) { arrowRoundTrip(t, schemas.RoundTripRows[schemas.TurnRow](4, n)) }},
		{"tokens", func(t *testing.T) { arrowRoundTrip(t, schemas.RoundTripRows[schemas.TokenRow](5, n)) }},
		{"routing", func(t *testing.T) { arrowRoundTrip(t, schemas.RoundTripRows[schemas.RoutingRow](6, n)) }},
		{"rewards", func(t *testing.T) { arrowRoundTrip(t, schemas.RoundTripRows[schemas.RewardRow](7, n)) }},
		{"values", func(t *testing.T) { arrowRoundTrip(t, schemas.RoundTripRows[schemas.ValueRow](8, n)) }},
		{"metrics", func(t *testing.T) { arrowRoundTrip(t, schemas.RoundTripRows[schemas.MetricRow](9, n)) }},
		{"eval_results", func(t *testing.T) { arrowRoundTrip(t, schemas.RoundTripRows[schemas.EvalResultRow](10, n)) }},
		{"tasks/empty", func(t *testing.T) { arrowRoundTrip(t, []schemas.TaskRow{}) }},
		{"tokens/empty", func(t *testing.T) { arrowRoundTrip(t, []schemas.TokenRow{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

func arrowRoundTrip[T schemas.Row](t *testing.T, rows []T) {
	t.Helper()
	ctx := context.Background()
	st := testinfra.Store(t)
	var zero T
	tbl := zero.Table()
	ref, err := schemas.WriteTable(ctx, st, "rt", 3, rows, schemas.WriterOptions{RowGroupRows: 4})
	if err != nil {
		t.Fatal(err)
	}
	// A checked allocator would flag buffers that arrow-go's delta
	// bit-pack decoder never returns (arrow-go v18.8.0); the Go allocator
	// leaves them to the garbage collector.
	mem := memory.NewGoAllocator()
	at, err := columnar.Read(ctx, st, ref.Key, &ref, tbl.Name, nil, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	if at.NumRows() != int64(len(rows)) {
		t.Fatalf("arrow-go read %d rows, wrote %d", at.NumRows(), len(rows))
	}
	rt := reflect.TypeFor[T]()
	if int(at.NumCols()) != rt.NumField() {
		t.Fatalf("arrow schema has %d columns, the row type %d: %s", at.NumCols(), rt.NumField(), at.Schema())
	}
	for c := range rt.NumField() {
		name := schemas.ColumnName(rt.Field(c))
		col := at.Column(c)
		if col.Name() != name {
			t.Fatalf("column %d is %q, want %q", c, col.Name(), name)
		}
		row := 0
		for _, chunk := range col.Data().Chunks() {
			for i := range chunk.Len() {
				want := schemas.Normalize(reflect.ValueOf(rows[row]).Field(c))
				have := arrowValue(chunk, i)
				if !reflect.DeepEqual(want, have) {
					t.Fatalf("arrow-go row %d column %s differs:\nwant %.300v\nhave %.300v", row, name, want, have)
				}
				row++
			}
		}
	}
	// Streamed as record batches, one column.
	o, err := schemas.Fetch(ctx, st, ref.Key, &ref, tbl.Name)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := columnar.Records(ctx, o, []string{"task_id"}, 5, mem)
	if err != nil && tbl.Name != schemas.MetricsTable.Name {
		t.Fatal(err)
	}
	if rr != nil {
		n := int64(0)
		for rr.Next() {
			rec := rr.RecordBatch()
			if rec.NumCols() != 1 || rec.NumRows() > 5 {
				t.Fatalf("record batch %d cols × %d rows", rec.NumCols(), rec.NumRows())
			}
			n += rec.NumRows()
		}
		rr.Release()
		if n != int64(len(rows)) {
			t.Fatalf("record batches hold %d rows, wrote %d", n, len(rows))
		}
	}
	// Conformed, a current file reads as Schema says, every column
	// nullable, with the same values.
	cur, err := columnar.Schema(tbl)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := columnar.Conformed(ctx, o, nil, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer ct.Release()
	if int(ct.NumCols()) != len(cur.Fields()) || ct.NumRows() != at.NumRows() {
		t.Fatalf("conformed: %d columns × %d rows; want %d × %d", ct.NumCols(), ct.NumRows(), len(cur.Fields()), at.NumRows())
	}
	for c := range int(ct.NumCols()) {
		f := ct.Schema().Field(c)
		if f.Name != at.Schema().Field(c).Name || !f.Nullable || !array.ChunkedEqual(ct.Column(c).Data(), at.Column(c).Data()) {
			t.Fatalf("conformed column %d (%s) differs from the plain read", c, f.Name)
		}
	}
}

// arrowValue reads element i of arr in normalize's form.
func arrowValue(arr arrow.Array, i int) any {
	switch a := arr.(type) {
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Uint64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Binary:
		return string(a.Value(i))
	case *array.Dictionary:
		return arrowValue(a.Dictionary(), a.GetValueIndex(i))
	case *array.List:
		start, end := a.ValueOffsets(i)
		out := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			out = append(out, arrowValue(a.ListValues(), int(j)))
		}
		return out
	case *array.Struct:
		m := map[string]any{}
		st := a.DataType().(*arrow.StructType)
		for f := range st.NumFields() {
			m[st.Field(f).Name] = arrowValue(a.Field(f), i)
		}
		return m
	}
	panic(fmt.Sprintf("arrowValue: %T", arr))
}

// turnRowV10 is a turns row as schema 1.0 wrote it, before purpose and
// policy_version.
type turnRowV10 struct {
	Run     string `parquet:"run,dict"`
	TaskID  string `parquet:"task_id"`
	Attempt int32  `parquet:"attempt"`
	Turn    int32  `parquet:"turn"`
	Action  string `parquet:"action"`
}

// A file of an older minor reads, conformed, as the current table: the
// columns added since are nulls, the others keep their values, and a
// column the table never had is an error.
func TestConformedOlderMinor(t *testing.T) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[turnRowV10](&buf, parquet.KeyValueMetadata(schemas.MetaTable, schemas.TurnsTable.Name), parquet.KeyValueMetadata(schemas.MetaVersion, "1.0"))
	if _, err := w.Write([]turnRowV10{{Run: "r", TaskID: "a", Turn: 0, Action: "<command>ls</command>"}, {Run: "r", TaskID: "a", Turn: 1, Action: "<task_complete/>"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	o, err := schemas.Parse("old.parquet", buf.Bytes(), nil, schemas.TurnsTable.Name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, mem := context.Background(), memory.NewGoAllocator()
	if _, err := columnar.Table(ctx, o, []string{"policy_version"}, mem); err == nil {
		t.Fatal("a plain read found a column the file does not have")
	}
	tbl, err := columnar.Conformed(ctx, o, []string{"action", "purpose", "policy_version"}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if tbl.NumRows() != 2 || tbl.NumCols() != 3 {
		t.Fatalf("%d rows × %d columns, want 2 × 3", tbl.NumRows(), tbl.NumCols())
	}
	action := tbl.Column(0).Data().Chunk(0).(*array.String)
	if action.Value(1) != "<task_complete/>" {
		t.Fatalf("action %q", action.Value(1))
	}
	for c := 1; c < 3; c++ {
		if col := tbl.Column(c); col.NullN() != 2 {
			t.Fatalf("column %s: %d nulls, want 2", col.Name(), col.NullN())
		}
	}
	all, err := columnar.Conformed(ctx, o, nil, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Release()
	cur, err := columnar.Schema(schemas.TurnsTable)
	if err != nil {
		t.Fatal(err)
	}
	if int(all.NumCols()) != len(cur.Fields()) {
		t.Fatalf("%d columns, the current turns table has %d", all.NumCols(), len(cur.Fields()))
	}
	if _, err := columnar.Conformed(ctx, o, []string{"reward"}, mem); err == nil {
		t.Fatal("conformed a column turns never had")
	}
}

// Damage inside a compressed page that no hash vouched for is an error
// naming the object, never data or a crash.
func TestDamagedObjectIsAnError(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	ref, err := schemas.WriteTable(ctx, st, "bad", 1, schemas.RoundTripRows[schemas.TokenRow](2, 9), schemas.WriterOptions{})
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
	damaged := 0
	for i := 1; i < 8; i++ {
		bad := bytes.Clone(data)
		bad[len(bad)*i/10] ^= 0x5a
		o, err := schemas.Parse("damaged.parquet", bad, nil, "")
		if err != nil {
			continue
		}
		damaged++
		tbl, err := columnar.Table(ctx, o, nil, nil)
		if tbl != nil {
			tbl.Release()
		}
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("damaged.parquet")) {
			t.Fatalf("damage at %d/10: %v", i, err)
		}
	}
	if damaged == 0 {
		t.Fatal("no damaged object got past the footer checks: the test checks nothing")
	}
}

// BenchmarkTokensTableArrow reads BenchmarkTokensTable's 256 chunks of
// 2048 tokens back as one arrow-go table.
func BenchmarkTokensTableArrow(b *testing.B) {
	ctx := context.Background()
	st := testinfra.Store(b)
	rows := schemas.BenchTokens(256)
	ref, err := schemas.WriteTable(ctx, st, "bench", 0, rows, schemas.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		t, err := columnar.Read(ctx, st, ref.Key, &ref, "tokens", nil, memory.NewGoAllocator())
		if err != nil {
			b.Fatal(err)
		}
		t.Release()
	}
	b.ReportMetric(float64(len(rows))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
