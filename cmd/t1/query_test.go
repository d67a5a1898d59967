package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/schemas"
)

// seedTables writes rewards and tokens objects of run "q" into the
// embedded store of data and returns the refs.
func seedTables(t *testing.T, data string) []schemas.FileRef {
	t.Helper()
	ctx := context.Background()
	cfg := config.Default()
	cfg.Data = data
	in, err := local.Open(ctx, cfg, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var refs []schemas.FileRef
	for iter := range 2 {
		var rows []schemas.RewardRow
		for i := range 10 {
			rows = append(rows, schemas.RewardRow{Run: "q", TaskID: "task-" + string(rune('a'+i)), Attempt: int32(i % 3),
				Iteration: int32(iter), Purpose: []string{"train", "eval"}[i%2], Passed: int32(i), Total: 10,
				Scale: 0.5, Reward: float64(i) * 0.5, Fallback: i == 7, Source: "ctrf",
				Assertions: []schemas.Assertion{{Name: "x", Passed: true}}})
		}
		ref, err := schemas.WriteTable(ctx, in.Store, "q", iter, rows, schemas.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	ref, err := schemas.WriteTable(ctx, in.Store, "q", 0, []schemas.TokenRow{{Run: "q", TaskID: "task-a",
		TokenIDs: make([]int32, 5000), LossMask: make([]bool, 5000), LogProbs: make([]float32, 5000)}}, schemas.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return append(refs, ref)
}

func TestInspect(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	refs := seedTables(t, data)
	out, err := t1(t, "inspect", "--data", data, "--log-level", "warn", "--json", refs[2].Key)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep schemas.FileReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Rows != 1 || rep.Check != "ok" || rep.Metadata[schemas.MetaTable] != "tokens" || len(rep.RowGroups) != 1 ||
		rep.Bytes != refs[2].Bytes {
		t.Fatalf("report %+v", rep)
	}
	var ids *schemas.ColumnChunk
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

	// The embedded store keeps each object as a plain file.
	local := filepath.Join(data, "s3", config.Default().Store.Bucket, refs[0].Key)
	if _, err := os.Stat(local); err != nil {
		t.Skipf("store layout: %v", err)
	}
	out, err = t1(t, "inspect", local)
	if err != nil || !strings.Contains(out, "t1.table = rewards") || !strings.Contains(out, "assertions") {
		t.Fatalf("local file: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.parquet")
	os.WriteFile(bad, []byte("PAR1 not really"), 0o644)
	if _, err := t1(t, "inspect", bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad file: %v", err)
	}
}
