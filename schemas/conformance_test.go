package schemas_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/query"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// toolTable is one tool's read of one table's directory.
type toolTable struct {
	Columns []string `json:"columns"`
	Types   []string `json:"types"`
	Rows    []string `json:"rows"` // each row as canonical JSON, sorted
}

// Every table of a run, its directory read whole with hive partitioning
// on by pyarrow's dataset API, polars and DuckDB, reads as `t1 query`
// prints it as Arrow: the same rows, the same column names (none twice),
// the same types, and the partition column a data column whose value the
// directory names — one partition compacted, one not.
func TestToolsReadEveryTableAlike(t *testing.T) {
	t.Parallel()
	py := testinfra.Python(t)
	ctx := context.Background()
	st := testinfra.Store(t)
	const run = "conform"
	dir, qdir := t.TempDir(), t.TempDir()
	for i, tbl := range schemas.Tables() {
		for part := 1; part <= 2; part++ {
			for obj := range 2 {
				writeSample(t, st, run, tbl, uint64(10*i+2*part+obj), part)
			}
		}
		if n, err := schemas.Compact(ctx, st, run, tbl, 1, schemas.WriterOptions{}); err != nil || n != 2 {
			t.Fatalf("%s: compacted %d: %v", tbl.Name, n, err)
		}
		var out bytes.Buffer
		if err := query.Run(ctx, st, tbl, query.Options{Run: run, Format: "arrow"}, &out); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(qdir, tbl.Name+".arrow"), out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyRun(t, st, run, dir)
	args := []string{filepath.Join(testinfra.WorkDir(), "testdata", "arrow_tools.py"), "--tables",
		filepath.Join(dir, keys.Run(run)), qdir}
	for _, tbl := range schemas.Tables() {
		args = append(args, tbl.Name)
	}
	cmd := exec.Command(py, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", py, err, stderr.Bytes())
	}
	var got map[string]map[string]toolTable
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range schemas.Tables() {
		want := got[tbl.Name]["t1"]
		if len(want.Rows) != 4*7 {
			t.Fatalf("%s: t1 query read %d rows, want %d", tbl.Name, len(want.Rows), 4*7)
		}
		seen := map[string]bool{}
		for _, c := range want.Columns {
			if seen[c] {
				t.Errorf("%s: t1 query has column %s twice", tbl.Name, c)
			}
			seen[c] = true
		}
		part := slices.Index(want.Columns, tbl.Partition)
		if part < 0 || !strings.HasPrefix(want.Types[part], "int") {
			t.Errorf("%s: partition column %s: %v %v", tbl.Name, tbl.Partition, want.Columns, want.Types)
		}
		for _, tool := range []string{"pyarrow", "polars", "duckdb"} {
			r := got[tbl.Name][tool]
			if !reflect.DeepEqual(r.Columns, want.Columns) {
				t.Errorf("%s/%s: columns %v, t1 query %v", tbl.Name, tool, r.Columns, want.Columns)
			}
			if !reflect.DeepEqual(r.Types, want.Types) {
				t.Errorf("%s/%s: types %v, t1 query %v", tbl.Name, tool, r.Types, want.Types)
			}
			if !reflect.DeepEqual(r.Rows, want.Rows) {
				t.Errorf("%s/%s: %d rows differ from t1 query's %d", tbl.Name, tool, len(r.Rows), len(want.Rows))
			}
		}
	}
}

// writeSample stores 7 sample rows of tbl in partition part, their
// partition column set to it.
func writeSample(t *testing.T, st store.ObjectStore, run string, tbl schemas.Table, seed uint64, part int) {
	t.Helper()
	var err error
	switch tbl.Name {
	case "tasks":
		_, err = schemas.WriteTable(context.Background(), st, run, part, inPartition(schemas.SampleRows[schemas.TaskRow](seed, 7), tbl, part), schemas.WriterOptions{})
	case "audits":
		_, err = schemas.WriteTable(context.Background(), st, run, part, inPartition(schemas.SampleRows[schemas.AuditRow](seed, 7), tbl, part), schemas.WriterOptions{})
	case "trajectories":
		_, err = schemas.WriteTable(context.Background(), st, run, part, inPartition(schemas.SampleRows[schemas.TrajectoryRow](seed, 7), tbl, part), schemas.WriterOptions{})
	case "turns":
		_, err = schemas.WriteTable(context.Background(), st, run, part, inPartition(schemas.SampleRows[schemas.TurnRow](seed, 7), tbl, part), schemas.WriterOptions{})
	case "tokens":
		_, err = schemas.WriteTable(context.Background(), st, run, part, inPartition(schemas.SampleRows[schemas.TokenRow](seed, 7), tbl, part), schemas.WriterOptions{})
	case "routing":
		_, err = schemas.WriteTable(context.Background(), st, run, part, inPartition(schemas.SampleRows[schemas.RoutingRow](seed, 7), tbl, part), schemas.WriterOptions{})
	case "rewards":
		_, err = schemas.WriteTable(context.Background(), st, run, part, inPartition(schemas.SampleRows[schemas.RewardRow](seed, 7), tbl, part), schemas.WriterOptions{})
	case "values":
		_, err = schemas.WriteTable(context.Background(), st, run, part, inPartition(schemas.SampleRows[schemas.ValueRow](seed, 7), tbl, part), schemas.WriterOptions{})
	case "metrics":
		_, err = schemas.WriteTable(context.Background(), st, run, part, inPartition(schemas.SampleRows[schemas.MetricRow](seed, 7), tbl, part), schemas.WriterOptions{})
	case "eval_results":
		_, err = schemas.WriteTable(context.Background(), st, run, part, inPartition(schemas.SampleRows[schemas.EvalResultRow](seed, 7), tbl, part), schemas.WriterOptions{})
	default:
		t.Fatalf("no sample rows of %s", tbl.Name)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// inPartition sets the partition column of every row to part.
func inPartition[T any](rows []T, tbl schemas.Table, part int) []T {
	for i := range rows {
		v := reflect.ValueOf(&rows[i]).Elem()
		for f := range v.NumField() {
			if name, _, _ := strings.Cut(v.Type().Field(f).Tag.Get("parquet"), ","); name == tbl.Partition {
				v.Field(f).SetInt(int64(part))
			}
		}
	}
	return rows
}

// copyRun copies every object of run to files under dir, by key.
func copyRun(t *testing.T, st store.ObjectStore, run, dir string) {
	t.Helper()
	ctx := context.Background()
	for info, err := range st.List(ctx, keys.Run(run)) {
		if err != nil {
			t.Fatal(err)
		}
		rc, _, err := st.Get(ctx, info.Key)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(info.Key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
