package schemas

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/store/errorstore"
)

// A compaction that fails at any call of the store — before the call
// reaches the store or after it took effect — and is then run again
// leaves a partition that reads as before: every claim check reads its
// own rows, a listing reader reads each row once, in between as after,
// and the partition ends as one object.
func TestCompactionCrashAtEveryCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := openStore(t)
	const files = 5
	write := func(t *testing.T, run string) ([]FileRef, []RewardRow) {
		rows := sampleRowsOf[RewardRow](3, files, []int{0, 2})
		var refs []FileRef
		for i := range rows {
			rows[i].Iteration = 2
			ref, err := WriteTable(ctx, base, run, 2, rows[i:i+1], WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			refs = append(refs, ref)
		}
		return refs, rows
	}
	check := func(t *testing.T, st store.ObjectStore, run string, refs []FileRef, rows []RewardRow, objects int) {
		t.Helper()
		for i, ref := range refs {
			got, err := ReadRows[RewardRow](ctx, st, ref.Key, &ref)
			if err != nil || !reflect.DeepEqual(got, rows[i:i+1]) {
				t.Fatalf("%s: %v, rows %+v", ref.Key, err, got)
			}
		}
		keys, err := TableObjects(ctx, st, run, RewardsTable)
		if err != nil {
			t.Fatal(err)
		}
		var listed []RewardRow
		for _, k := range keys {
			got, err := ReadRows[RewardRow](ctx, st, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			listed = append(listed, got...)
		}
		key := func(r RewardRow) string { return fmt.Sprintf("%+v", r) }
		want := slices.Sorted(slices.Values(mapSlice(rows, key)))
		if got := slices.Sorted(slices.Values(mapSlice(listed, key))); !slices.Equal(got, want) {
			t.Fatalf("listing reads %d rows, want %d", len(got), len(want))
		}
		if objects > 0 && len(keys) != objects {
			t.Fatalf("%d objects, want %d: %v", len(keys), objects, keys)
		}
	}

	// The calls a whole compaction makes, each a crash point.
	refs, rows := write(t, "cc-clean")
	counter := errorstore.New(base)
	if n, err := Compact(ctx, counter, "cc-clean", RewardsTable, 2, WriterOptions{}); err != nil || n != files {
		t.Fatalf("compact: %d, %v", n, err)
	}
	check(t, base, "cc-clean", refs, rows, 1)
	calls := counter.Calls()
	if again, err := Compact(ctx, base, "cc-clean", RewardsTable, 2, WriterOptions{}); err != nil || again != 0 {
		t.Fatalf("compacting a compacted partition: %d, %v", again, err)
	}

	points := 0
	for _, c := range calls {
		for _, after := range []bool{false, true} {
			if after && !c.Op.Writes() {
				continue
			}
			run := fmt.Sprintf("cc-%s-%d-%v", c.Op, c.N, after)
			if len(run) > 64 {
				t.Fatal(run)
			}
			points++
			// Each crash point has a run of its own: they run side by side.
			t.Run(run, func(t *testing.T) {
				t.Parallel()
				refs, rows := write(t, lowerRun(run))
				faulty := errorstore.New(base, errorstore.Fault{Op: c.Op, N: c.N, After: after})
				if _, err := Compact(ctx, faulty, lowerRun(run), RewardsTable, 2, WriterOptions{}); err == nil {
					t.Fatalf("%s: no error", run)
				}
				check(t, base, lowerRun(run), refs, rows, 0)
				if _, err := Compact(ctx, base, lowerRun(run), RewardsTable, 2, WriterOptions{}); err != nil {
					t.Fatalf("%s: again: %v", run, err)
				}
				check(t, base, lowerRun(run), refs, rows, 1)
			})
		}
	}
	t.Logf("%d store calls in a compaction of %d objects, %d crash points", len(calls), files, points)
}

func mapSlice[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// lowerRun makes a run id of a test case's name.
func lowerRun(s string) string {
	out := []byte{}
	for _, c := range []byte(s) {
		switch {
		case c >= 'A' && c <= 'Z':
			out = append(out, c+'a'-'A')
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			out = append(out, c)
		}
	}
	return string(out)
}
