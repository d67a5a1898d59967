package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

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

func TestQuery(t *testing.T) {
	data := t.TempDir()
	seedTables(t, data)
	q := func(args ...string) string {
		t.Helper()
		out, err := t1(t, append([]string{"query", "--data", data, "--log-level", "warn", "--run", "q"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}

	out := q("rewards", "--format", "csv", "--select", "task_id,reward,iteration",
		"--where", "(reward >= 2 AND reward < 3.5) OR (task_id = 'task-j' AND NOT iteration != 1)")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"task_id", "reward", "iteration"},
		{"task-e", "2", "0"}, {"task-f", "2.5", "0"}, {"task-g", "3", "0"},
		{"task-e", "2", "1"}, {"task-f", "2.5", "1"}, {"task-g", "3", "1"}, {"task-j", "4.5", "1"}}
	if len(recs) != len(want) {
		t.Fatalf("got %q", recs)
	}
	for i := range want {
		if strings.Join(recs[i], ",") != strings.Join(want[i], ",") {
			t.Fatalf("row %d: %q, want %q", i, recs[i], want[i])
		}
	}

	// The partition column comes from the key.
	out = q("rewards", "--format", "csv", "--select", "iter,task_id", "--where", "iter = 1 AND reward >= 4")
	if strings.TrimSpace(out) != "iter,task_id\n1,task-i\n1,task-j" {
		t.Fatalf("partition column: %q", out)
	}

	out = q("rewards", "--format", "json", "--where", "fallback = true and purpose = \"eval\"")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("json: %q", out)
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &row); err != nil || row["task_id"] != "task-h" || row["reward"] != 3.5 {
		t.Fatalf("json row %v: %v", row, err)
	}

	out = q("rewards", "--limit", "3", "--select", "task_id,purpose")
	if got := strings.Split(strings.TrimSpace(out), "\n"); len(got) != 4 || !strings.HasPrefix(got[0], "task_id") ||
		!strings.Contains(got[3], "task-c") {
		t.Fatalf("table: %q", out)
	}

	out = q("tokens")
	if !strings.Contains(out, "… (5000)]") {
		t.Fatalf("long list not shortened: %q", out)
	}

	out = q("rewards", "--format", "arrow", "--where", "passed > 7")
	rd, err := ipc.NewReader(bytes.NewReader([]byte(out)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rd.Next() {
		rec := rd.RecordBatch()
		n += int(rec.NumRows())
		for i := range int(rec.NumRows()) {
			col := rec.Column(rec.Schema().FieldIndices("passed")[0]).(*array.Int32)
			if col.Value(i) <= 7 {
				t.Fatalf("arrow row with passed %d", col.Value(i))
			}
		}
	}
	rd.Release()
	if n != 4 {
		t.Fatalf("arrow stream holds %d rows, want 4", n)
	}

	if out := q("metrics"); !strings.Contains(out, "(no rows)") {
		t.Fatalf("empty table: %q", out)
	}

	for _, tc := range []struct{ args, want []string }{
		{[]string{"rewardz"}, []string{`unknown table "rewardz"`}},
		{[]string{"rewards", "--where", "reward >"}, []string{"--where", "want a number"}},
		{[]string{"rewards", "--where", "(reward > 1"}, []string{"want ')'"}},
		{[]string{"rewards", "--where", "nope = 1"}, []string{`no column "nope"`}},
		{[]string{"rewards", "--where", "task_id > 3"}, []string{`column "task_id" is utf8`}},
		{[]string{"rewards", "--select", "nope"}, []string{`no column "nope"`}},
		{[]string{"rewards", "--format", "xml"}, []string{`--format "xml"`}},
	} {
		out, err := t1(t, append([]string{"query", "--data", data, "--log-level", "warn", "--run", "q"}, tc.args...)...)
		if err == nil {
			t.Fatalf("%v: no error\n%s", tc.args, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%v: error %q lacks %q", tc.args, err, w)
			}
		}
	}
}

func TestParseWhere(t *testing.T) {
	for _, s := range []string{"a = 1", "a == 'x''y'", "NOT (a < -1.5e3 or b >= 2) AND c != true", "a<=1 and b>2"} {
		if _, err := parseWhere(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for s, want := range map[string]string{
		"":           "ends early",
		"a":          "want a comparison",
		"a = ":       "want a number",
		"a = 'x":     "unterminated",
		"a = 1 b":    "unexpected",
		"a ! 1":      "'!' must be",
		"and = 1":    "want a column",
		"a = 1 or":   "ends early",
		"a = 1 # 2":  "unexpected",
		"a = 1.2.3":  "bad number",
		"(a = 1))":   "unexpected",
		"a = b":      "want a number",
		"NOT NOT":    "ends early",
		"a = 1 and(": "ends early",
	} {
		_, err := parseWhere(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", s, err, want)
		}
	}
}

// FuzzParseWhere: the parser never panics, and what it accepts names
// only columns that appear in the input.
func FuzzParseWhere(f *testing.F) {
	for _, s := range []string{"a = 1", "NOT (a < -1.5e3 or b >= 2) AND c != true", "x = 'it''s'", "((a>1))", "a == \"q\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseWhere(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--where: ") {
				t.Fatalf("error %q lacks the flag name", err)
			}
			return
		}
		e.columns(func(c string) {
			if !strings.Contains(s, c) {
				t.Fatalf("column %q not in %q", c, s)
			}
		})
	})
}

func TestInspect(t *testing.T) {
	data := t.TempDir()
	refs := seedTables(t, data)
	out, err := t1(t, "inspect", "--data", data, "--log-level", "warn", "--json", refs[2].Key)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Rows != 1 || rep.Check != "ok" || rep.Metadata[schemas.MetaTable] != "tokens" || len(rep.RowGroups) != 1 ||
		rep.Bytes != refs[2].Bytes {
		t.Fatalf("report %+v", rep)
	}
	var ids *columnChunkInfo
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
