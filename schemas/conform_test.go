package schemas

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
)

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
	w := parquet.NewGenericWriter[turnRowV10](&buf, parquet.KeyValueMetadata(MetaTable, TurnsTable.Name), parquet.KeyValueMetadata(MetaVersion, "1.0"))
	if _, err := w.Write([]turnRowV10{{Run: "r", TaskID: "a", Turn: 0, Action: "<command>ls</command>"}, {Run: "r", TaskID: "a", Turn: 1, Action: "<task_complete/>"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	o, err := Parse("old.parquet", buf.Bytes(), nil, TurnsTable.Name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, mem := context.Background(), memory.NewGoAllocator()
	if _, err := o.Arrow(ctx, []string{"policy_version"}, mem); err == nil {
		t.Fatal("a plain read found a column the file does not have")
	}
	tbl, err := o.Conformed(ctx, []string{"action", "purpose", "policy_version"}, mem)
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
	all, err := o.Conformed(ctx, nil, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Release()
	cur, err := ArrowSchema(TurnsTable)
	if err != nil {
		t.Fatal(err)
	}
	if int(all.NumCols()) != len(cur.Fields()) {
		t.Fatalf("%d columns, the current turns table has %d", all.NumCols(), len(cur.Fields()))
	}
	if _, err := o.Conformed(ctx, []string{"reward"}, mem); err == nil {
		t.Fatal("conformed a column turns never had")
	}
}
