package schemas

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
)

// Inspect finds a table object's layout and the metadata t1's readers
// check, and refuses what is not Parquet, naming it.
func TestInspect(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	ref, err := WriteTable(ctx, st, "insp", 0, []TokenRow{{Run: "insp", TaskID: "task-a",
		TokenIDs: make([]int32, 5000), LossMask: make([]bool, 5000), LogProbs: make([]float32, 5000)}}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := st.Get(ctx, ref.Key)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Inspect(ref.Key, data)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 1 || rep.Check != "ok" || rep.Metadata[MetaTable] != "tokens" || len(rep.RowGroups) != 1 || rep.Bytes != ref.Bytes {
		t.Fatalf("report %+v", rep)
	}
	var ids *ColumnChunk
	for i, c := range rep.RowGroups[0].Columns {
		if strings.HasPrefix(c.Path, "token_ids") {
			ids = &rep.RowGroups[0].Columns[i]
		}
	}
	if ids == nil || ids.Codec != "ZSTD" || ids.Values != 5000 || ids.CompressedSize <= 0 {
		t.Fatalf("token_ids chunk %+v", ids)
	}
	// Low-cardinality strings are dictionary-encoded.
	if run := rep.RowGroups[0].Columns[0]; run.Path != "run" || !slices.Contains(run.Encodings, "RLE_DICTIONARY") {
		t.Fatalf("run column %+v", run)
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	if !strings.Contains(b.String(), "t1.table = tokens") || !strings.Contains(b.String(), "token_ids") {
		t.Fatalf("text:\n%s", b.String())
	}
	if _, err := Inspect("bad.parquet", []byte("PAR1 not really")); err == nil || !strings.Contains(err.Error(), "bad.parquet") {
		t.Fatalf("bad file: %v", err)
	}
}
