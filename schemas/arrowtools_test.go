package schemas

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/store"
)

// toolRead is what one Arrow tool read of one file (testdata/arrow_tools.py).
type toolRead struct {
	Columns []string `json:"columns"`
	Rows    []any    `json:"rows"`
}

// Researchers read t1's tables with pyarrow, polars and DuckDB: each of
// them reads every table's file with the columns in the order t1 wrote
// them and every value equal to the row t1 wrote, lists of every length,
// unsigned 64-bit integers, float32s and binary columns included.
func TestArrowToolsReadEveryTable(t *testing.T) {
	t.Parallel()
	py := testinfra.Python(t)
	st := openStore(t)
	dir := t.TempDir()
	const n = 13
	checks := map[string]func(t *testing.T, r toolRead){}
	for _, write := range []func() (string, func(*testing.T, toolRead)){
		toolFile[TaskRow](t, st, dir, 1, n),
		toolFile[AuditRow](t, st, dir, 2, n),
		toolFile[TrajectoryRow](t, st, dir, 3, n),
		toolFile[TurnRow](t, st, dir, 4, n),
		toolFile[TokenRow](t, st, dir, 5, n),
		toolFile[RoutingRow](t, st, dir, 6, n),
		toolFile[RewardRow](t, st, dir, 7, n),
		toolFile[ValueRow](t, st, dir, 8, n),
		toolFile[MetricRow](t, st, dir, 9, n),
		toolFile[EvalResultRow](t, st, dir, 10, n),
	} {
		p, check := write()
		checks[p] = check
	}
	if len(checks) != len(Tables()) {
		t.Fatalf("%d tables written, %d tables exist", len(checks), len(Tables()))
	}

	args := []string{filepath.Join(testinfra.WorkDir(), "testdata", "arrow_tools.py")}
	for p := range checks {
		args = append(args, p)
	}
	cmd := exec.Command(py, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", py, err, stderr.Bytes())
	}
	var got map[string]map[string]toolRead
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	for p, check := range checks {
		for _, tool := range []string{"pyarrow", "polars", "duckdb"} {
			r, ok := got[p][tool]
			if !ok {
				t.Errorf("%s: no %s read", filepath.Base(p), tool)
				continue
			}
			t.Run(filepath.Base(p)+"/"+tool, func(t *testing.T) { check(t, r) })
		}
	}
}

// toolFile returns a function that writes n sample rows of T with t1's
// writer and copies the object to a file in dir, returning its path and
// the check of a tool's read of it.
func toolFile[T Row](t *testing.T, st store.ObjectStore, dir string, seed uint64, n int) func() (string, func(*testing.T, toolRead)) {
	return func() (string, func(*testing.T, toolRead)) {
		ctx := context.Background()
		// Lists of every length up to thousands of values (hundreds
		// with -short); the round trip's 20,000 would cost three tools'
		// JSON ten seconds more.
		long := 3000
		if testing.Short() {
			long = 300
		}
		rows := sampleRowsOf[T](seed, n, []int{0, 1, 3, long, 0, 2})
		ref, err := WriteTable(ctx, st, "tools", 0, rows, WriterOptions{RowGroupRows: 4})
		if err != nil {
			t.Fatal(err)
		}
		body, _, err := st.Get(ctx, ref.Key)
		if err != nil {
			t.Fatal(err)
		}
		defer body.Close()
		data, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, ref.Table+".parquet")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p, func(t *testing.T, r toolRead) { compareRead(t, reflect.ValueOf(rows), r) }
	}
}

// compareRead checks one tool's read of rows, a slice of row structs.
func compareRead(t *testing.T, rows reflect.Value, r toolRead) {
	rt := rows.Type().Elem()
	var want []string
	for i := range rt.NumField() {
		want = append(want, columnName(rt.Field(i)))
	}
	if !reflect.DeepEqual(r.Columns, want) {
		t.Fatalf("columns %v, want %v", r.Columns, want)
	}
	if len(r.Rows) != rows.Len() {
		t.Fatalf("%d rows, wrote %d", len(r.Rows), rows.Len())
	}
	for i := range rows.Len() {
		if err := sameValue(rows.Index(i), r.Rows[i]); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
}

// sameValue says where a value decoded from a tool's JSON differs from
// the Go value t1 wrote.
func sameValue(v reflect.Value, got any) error {
	switch v.Kind() {
	case reflect.Struct:
		m, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%T, want an object", got)
		}
		for i := range v.NumField() {
			name := columnName(v.Type().Field(i))
			if err := sameValue(v.Field(i), m[name]); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		return nil
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			m, ok := got.(map[string]any)
			if !ok || m["hex"] != hex.EncodeToString(v.Bytes()) {
				return fmt.Errorf("%.80v, want bytes %x", got, v.Bytes())
			}
			return nil
		}
		l, ok := got.([]any)
		if !ok || len(l) != v.Len() {
			return fmt.Errorf("%.80v, want a list of %d", got, v.Len())
		}
		for i := range l {
			if err := sameValue(v.Index(i), l[i]); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return nil
	case reflect.String:
		if got != v.String() {
			return fmt.Errorf("%q, want %q", got, v.String())
		}
		return nil
	case reflect.Bool:
		if got != v.Bool() {
			return fmt.Errorf("%v, want %v", got, v.Bool())
		}
		return nil
	}
	num, ok := got.(json.Number)
	if !ok {
		return fmt.Errorf("%.80v (%T), want a number", got, got)
	}
	switch v.Kind() {
	case reflect.Int32, reflect.Int64:
		if x, err := strconv.ParseInt(string(num), 10, 64); err != nil || x != v.Int() {
			return fmt.Errorf("%s, want %d", num, v.Int())
		}
	case reflect.Uint8, reflect.Uint64:
		if x, err := strconv.ParseUint(string(num), 10, 64); err != nil || x != v.Uint() {
			return fmt.Errorf("%s, want %d", num, v.Uint())
		}
	case reflect.Float32, reflect.Float64:
		want := v.Float()
		if v.Kind() == reflect.Float32 {
			want = float64(float32(want))
		}
		if x, err := strconv.ParseFloat(string(num), 64); err != nil || x != want {
			return fmt.Errorf("%s, want %v", num, want)
		}
	default:
		return fmt.Errorf("unsupported kind %s", v.Kind())
	}
	return nil
}
