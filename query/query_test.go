package query

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// seedTables writes two rewards objects and one tokens object of run "q".
func seedTables(t *testing.T, st store.ObjectStore) {
	t.Helper()
	ctx := context.Background()
	for iter := range 2 {
		var rows []schemas.RewardRow
		for i := range 10 {
			rows = append(rows, schemas.RewardRow{Run: "q", TaskID: "task-" + string(rune('a'+i)), Attempt: int32(i % 3),
				Iteration: int32(iter), Purpose: []string{"train", "eval"}[i%2], Passed: int32(i), Total: 10,
				Scale: 0.5, Reward: float64(i) * 0.5, Fallback: i == 7, Source: "ctrf",
				Assertions: []schemas.Assertion{{Name: "x", Passed: true}}})
		}
		if _, err := schemas.WriteTable(ctx, st, "q", iter, rows, schemas.WriterOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := schemas.WriteTable(ctx, st, "q", 0, []schemas.TokenRow{{Run: "q", TaskID: "task-a",
		TokenIDs: make([]int32, 5000), LossMask: make([]bool, 5000), LogProbs: make([]float32, 5000)}}, schemas.WriterOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestQuery(t *testing.T) {
	st := testinfra.FreshStore(t)
	seedTables(t, st)
	run := func(table, format, where, sel string, limit int64) (string, error) {
		t.Helper()
		tbl, err := schemas.LookupTable(table)
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Run: "q", Select: Columns(sel), Limit: limit, Format: format}
		if where != "" {
			if o.Where, err = ParseWhere(where); err != nil {
				return "", err
			}
		}
		var b bytes.Buffer
		err = Run(context.Background(), st, tbl, o, &b)
		return b.String(), err
	}
	q := func(table, format, where, sel string, limit int64) string {
		t.Helper()
		out, err := run(table, format, where, sel, limit)
		if err != nil {
			t.Fatalf("%s %s %q: %v\n%s", table, format, where, err, out)
		}
		return out
	}

	out := q("rewards", "csv", "(reward >= 2 AND reward < 3.5) OR (task_id = 'task-j' AND NOT iteration != 1)", "task_id,reward,iteration", 0)
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

	// A partition directory adds no column: the partition is the data
	// column, once, as DuckDB, pyarrow and polars read it.
	out = q("rewards", "csv", "iteration = 1 AND reward >= 4", "iteration,task_id", 0)
	if strings.TrimSpace(out) != "iteration,task_id\n1,task-i\n1,task-j" {
		t.Fatalf("partition column: %q", out)
	}
	if _, err := ParseWhere("iter = 1"); err == nil {
		if header, _, _ := strings.Cut(q("rewards", "csv", "", "", 1), "\n"); strings.Count(header, "iteration") != 1 || strings.Contains(header, "iter,") {
			t.Fatalf("header %q", header)
		}
	}

	// Compacted, the table prints the same rows.
	all := q("rewards", "csv", "", "", 0)
	for iter := range 2 {
		if _, err := schemas.Compact(context.Background(), st, "q", schemas.RewardsTable, iter, schemas.WriterOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := q("rewards", "csv", "", "", 0); got != all {
		t.Fatalf("compacted:\n%s\nwant\n%s", got, all)
	}

	// json is one array, ndjson one object a line, the same rows.
	out = q("rewards", "json", "fallback = true and purpose = \"eval\"", "", 0)
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 || rows[0]["task_id"] != "task-h" || rows[0]["reward"] != 3.5 {
		t.Fatalf("json rows %v: %v\n%s", rows, err, out)
	}
	out = q("rewards", "ndjson", "fallback = true and purpose = \"eval\"", "", 0)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var row map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &row); err != nil || len(lines) != 2 || row["task_id"] != "task-h" || row["iteration"] != 0.0 {
		t.Fatalf("ndjson row %v: %v\n%s", row, err, out)
	}
	if out := q("rewards", "json", "reward > 100", "", 0); out != "[]\n" {
		t.Fatalf("empty json: %q", out)
	}
	// Rows come out by iteration, task and attempt whatever the objects'
	// order, so --limit takes the first of them.
	out = q("rewards", "csv", "task_id = 'task-b' OR task_id = 'task-a'", "task_id,iteration,attempt", 3)
	if strings.TrimSpace(out) != "task_id,iteration,attempt\ntask-a,0,0\ntask-b,0,1\ntask-a,1,0" {
		t.Fatalf("order: %q", out)
	}

	out = q("rewards", "table", "", "task_id,purpose", 3)
	if got := strings.Split(strings.TrimSpace(out), "\n"); len(got) != 4 || !strings.HasPrefix(got[0], "task_id") ||
		!strings.Contains(got[3], "task-c") {
		t.Fatalf("table: %q", out)
	}

	out = q("tokens", "table", "", "", 0)
	if !strings.Contains(out, "… (5000)]") {
		t.Fatalf("long list not shortened: %q", out)
	}
	// Wide cells end in an ellipsis in the table format, never in csv.
	if c := clip(strings.Repeat("é", 2*cellWidth)); utf8.RuneCountInString(c) != cellWidth || !strings.HasSuffix(c, "…") {
		t.Fatalf("wide cell not clipped: %q", c)
	}
	if out := q("tokens", "csv", "", "token_ids", 0); strings.Contains(out, "…") || strings.Count(out, ",") < 4999 {
		t.Fatalf("csv shortened: %.200q", out)
	}

	out = q("rewards", "arrow", "passed > 7", "", 0)
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

	if out := q("metrics", "table", "", "", 0); !strings.Contains(out, "(no rows)") {
		t.Fatalf("empty table: %q", out)
	}

	for _, tc := range []struct{ where, sel, want string }{
		{"reward >", "", "want a number"},
		{"(reward > 1", "", "want ')'"},
		{"nope = 1", "", `--where: unknown column "nope" (columns of rewards: `},
		{"task_id > 3", "", `column "task_id" is utf8`},
		{"", "rewrd", `--select: unknown column "rewrd" (columns of rewards: reward, `},
		{"purpose = eval", "", `quote text: purpose = 'eval'`},
	} {
		out, err := run("rewards", "table", tc.where, tc.sel, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%q %q: error %v, want %q\n%s", tc.where, tc.sel, err, tc.want, out)
		}
	}
	if err := checkFormat("yaml"); err == nil || !strings.Contains(err.Error(), `unknown format "yaml" (formats: `) ||
		exit.Code(context.Background(), err) != exit.Config {
		t.Fatalf("format xml: %v", err)
	}
	for _, f := range Formats {
		if err := checkFormat(f); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseWhere(t *testing.T) {
	for _, s := range []string{"a = 1", "a == 'x''y'", "NOT (a < -1.5e3 or b >= 2) AND c != true", "a<=1 and b>2"} {
		if _, err := ParseWhere(s); err != nil {
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
		_, err := ParseWhere(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", s, err, want)
		}
	}
}

// FuzzWhere: the parser never panics; what it accepts names only columns
// that appear in the input, and prints as an expression that parses to
// itself (parse → print → parse is stable).
func FuzzWhere(f *testing.F) {
	for _, s := range []string{"a = 1", "NOT (a < -1.5e3 or b >= 2) AND c != true", "x = 'it''s'", "((a>1))", "a == \"q\"",
		"purpose = 'eval' OR NOT fallback = FALSE and x.y <= +.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseWhere(s)
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
		printed := e.String()
		again, err := ParseWhere(printed)
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", s, printed, err)
		}
		if again.String() != printed {
			t.Fatalf("%q printed as %q, then as %q", s, printed, again.String())
		}
	})
}
