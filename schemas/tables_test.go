package schemas

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/t1pipe/t1/keys"
)

// fill sets every field of the struct v points to from rng. Slices get
// lengths from lens in turn (empty, short and very long lists).
func fill(rng *rand.Rand, v reflect.Value, lens []int, row int) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fill(rng, v.Field(i), lens, row+i)
		}
	case reflect.String:
		n := rng.IntN(12)
		if row%7 == 0 {
			n = 0
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = "abcdefghij é✓"[rng.IntN(10)]
		}
		v.SetString(string(b))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 1)
	case reflect.Uint8:
		v.SetUint(uint64(rng.IntN(256)))
	case reflect.Int32:
		v.SetInt(int64(rng.Int32()) - 1<<30)
	case reflect.Int64:
		v.SetInt(rng.Int64() - 1<<62)
	case reflect.Uint64:
		v.SetUint(rng.Uint64())
	case reflect.Float32:
		v.SetFloat(float64(rng.Float32()*2 - 1))
	case reflect.Float64:
		v.SetFloat(rng.NormFloat64())
	case reflect.Slice:
		n := lens[row%len(lens)]
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, s.Index(i), lens, row+i)
		}
		v.Set(s)
	default:
		panic("fill: unsupported kind " + v.Kind().String())
	}
}

// sampleRows makes n rows of T with list lengths cycling through 0, 1, 3
// and a very long one.
func sampleRows[T Row](seed uint64, n int) []T {
	return sampleRowsOf[T](seed, n, []int{0, 1, 3, 20000, 0, 2})
}

// sampleRowsOf makes n rows of T with list lengths cycling through lens.
func sampleRowsOf[T Row](seed uint64, n int, lens []int) []T {
	rng := rand.New(rand.NewPCG(seed, 99))
	rows := make([]T, n)
	for i := range rows {
		fill(rng, reflect.ValueOf(&rows[i]).Elem(), lens, i)
	}
	return rows
}

// normalize turns a Go value into the form arrowValue produces, so that
// the two can be compared with reflect.DeepEqual.
func normalize(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Struct:
		m := map[string]any{}
		for i := range v.NumField() {
			m[columnName(v.Type().Field(i))] = normalize(v.Field(i))
		}
		return m
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return string(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = normalize(v.Index(i))
		}
		return out
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return v.Bool()
	case reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint64:
		return v.Uint()
	case reflect.Float32:
		return float64(float32(v.Float()))
	case reflect.Float64:
		return v.Float()
	}
	panic("normalize: " + v.Kind().String())
}

func columnName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
	return name
}

// roundTrip writes rows, reads them back with parquet-go, and compares
// every value (columnar's tests read them with arrow-go).
func roundTrip[T Row](t *testing.T, rows []T) {
	t.Helper()
	ctx := context.Background()
	st := openStore(t)
	ref, err := WriteTable(ctx, st, "rt", 3, rows, WriterOptions{RowGroupRows: 4})
	if err != nil {
		t.Fatal(err)
	}
	var zero T
	tbl := zero.Table()
	if !strings.HasPrefix(ref.Key, keys.TablePrefix("rt", tbl.Name)+tbl.Dir+"-0003/part-") || ref.Rows != int64(len(rows)) ||
		ref.Table != tbl.Name || ref.SchemaVersion != tbl.Version.String() {
		t.Fatalf("ref %+v", ref)
	}
	got, err := ReadRows[T](ctx, st, ref.Key, &ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("parquet-go read %d rows, wrote %d", len(got), len(rows))
	}
	for i := range rows {
		want, have := normalize(reflect.ValueOf(rows[i])), normalize(reflect.ValueOf(got[i]))
		if !reflect.DeepEqual(want, have) {
			t.Fatalf("parquet-go row %d differs:\nwant %.300v\nhave %.300v", i, want, have)
		}
	}
	// Identical rows give the identical, already present object.
	again, err := WriteTable(ctx, st, "rt", 3, rows, WriterOptions{RowGroupRows: 4})
	if err != nil || again != ref {
		t.Fatalf("rewrite: %+v, %v; first %+v", again, err, ref)
	}
}

func TestRoundTripEveryTable(t *testing.T) {
	t.Parallel()
	const n = 13
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"tasks", func(t *testing.T) { roundTrip(t, sampleRows[TaskRow](1, n)) }},
		{"audits", func(t *testing.T) { roundTrip(t, sampleRows[AuditRow](2, n)) }},
		{"trajectories", func(t *testing.T) { roundTrip(t, sampleRows[TrajectoryRow](3, n)) }},
		{"turns", func(t *testing.T) { roundTrip(t, sampleRows[TurnRow](4, n)) }},
		{"tokens", func(t *testing.T) { roundTrip(t, sampleRows[TokenRow](5, n)) }},
		{"routing", func(t *testing.T) { roundTrip(t, sampleRows[RoutingRow](6, n)) }},
		{"rewards", func(t *testing.T) { roundTrip(t, sampleRows[RewardRow](7, n)) }},
		{"values", func(t *testing.T) { roundTrip(t, sampleRows[ValueRow](8, n)) }},
		{"metrics", func(t *testing.T) { roundTrip(t, sampleRows[MetricRow](9, n)) }},
		{"eval_results", func(t *testing.T) { roundTrip(t, sampleRows[EvalResultRow](10, n)) }},
		{"tasks/empty", func(t *testing.T) { roundTrip(t, []TaskRow{}) }},
		{"tokens/empty", func(t *testing.T) { roundTrip(t, []TokenRow{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

// Every table is covered by the round trip above.
func TestEveryTableHasARowType(t *testing.T) {
	rows := []Row{TaskRow{}, AuditRow{}, TrajectoryRow{}, TurnRow{}, TokenRow{}, RoutingRow{}, RewardRow{}, ValueRow{},
		MetricRow{}, EvalResultRow{}}
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Table().Name] = true
		// parquet-go writes a []uint8 field tagged list as empty lists
		// without an error; byte slices must be plain binary columns.
		checkNoByteLists(t, reflect.TypeOf(r))
	}
	for _, tbl := range Tables() {
		if !seen[tbl.Name] {
			t.Errorf("table %s has no row type", tbl.Name)
		}
	}
}

func checkNoByteLists(t *testing.T, rt reflect.Type) {
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Uint8 && strings.Contains(f.Tag.Get("parquet"), ",list") {
			t.Errorf("%s.%s: []uint8 tagged list", rt.Name(), f.Name)
		}
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct {
			checkNoByteLists(t, f.Type.Elem())
		}
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

// fillJSON fills a payload value, maps included, with non-zero data.
func fillJSON(rng *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range 2 {
			val := reflect.New(v.Type().Elem()).Elem()
			fillJSON(rng, val)
			m.SetMapIndex(reflect.ValueOf(fmt.Sprintf("k%d", i)), val)
		}
		v.Set(m)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fillJSON(rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			fillJSON(rng, v.Field(i))
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillJSON(rng, p.Elem())
		v.Set(p)
	case reflect.Int:
		v.SetInt(int64(rng.IntN(1000) + 1))
	case reflect.Uint64:
		v.SetUint(rng.Uint64() >> 12) // exact in a float64 JSON reader too
	default:
		fill(rng, v, []int{2}, 1)
	}
}
