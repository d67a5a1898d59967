package query

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// seedAttempts writes trajectories of run "p" over two iterations, 12
// attempts each, and rewards for all but the last attempt of each.
func seedAttempts(t testing.TB, st store.ObjectStore) {
	t.Helper()
	ctx := context.Background()
	for iter := range 2 {
		var trajs []schemas.TrajectoryRow
		var rewards []schemas.RewardRow
		for i := range 12 {
			task := fmt.Sprintf("task-%02d", i)
			trajs = append(trajs, schemas.TrajectoryRow{Run: "p", TaskID: task, Attempt: int32(i % 2), Iteration: int32(iter),
				Purpose: "train", PolicyVersion: int64(iter + 1), Turns: int32(i), Tokens: int64(100 * i), Termination: "task_complete"})
			if i < 11 {
				rewards = append(rewards, schemas.RewardRow{Run: "p", TaskID: task, Attempt: int32(i % 2), Iteration: int32(iter),
					Purpose: "train", PolicyVersion: int64(iter + 1), Passed: int32(i % 4), Total: 3, Reward: float64(i%4) / 3, Source: "ctrf"})
			}
		}
		if _, err := schemas.WriteTable(ctx, st, "p", iter, trajs, schemas.WriterOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := schemas.WriteTable(ctx, st, "p", iter, rewards, schemas.WriterOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func strs(rec arrow.RecordBatch, col string) []string {
	var out []string
	if rec == nil {
		return out
	}
	a := rec.Column(rec.Schema().FieldIndices(col)[0])
	for i := range a.Len() {
		out = append(out, a.ValueStr(i))
	}
	return out
}

// A page of attempts is ordered by the key asked for, the table's order
// breaking ties, cut at offset and limit, and carries each attempt's
// verdict from the rewards table, null where none is stored yet.
func TestReadAttemptsPages(t *testing.T) {
	st := testinfra.FreshStore(t)
	seedAttempts(t, st)
	ctx := context.Background()
	where, err := ParseWhere("turns >= 2 AND iteration = 1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ReadAttempts(ctx, st, PageOptions{Run: "p", Where: where, Order: []Order{{Column: "reward", Desc: true}},
		Offset: 1, Limit: 4, Select: []string{"task_id", "reward", "passed"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	// Turns 2..11 of iteration 1: ten attempts; rewards by i%4 (task-11 has
	// none: null sorts last descending); ties by task.
	if p.Total != 10 || p.Rows.NumCols() != 3 {
		t.Fatalf("total %d, cols %d", p.Total, p.Rows.NumCols())
	}
	if got, want := strings.Join(strs(p.Rows, "task_id"), " "), "task-07 task-02 task-06 task-10"; got != want {
		t.Fatalf("page %s, want %s", got, want)
	}
	last, err := ReadAttempts(ctx, st, PageOptions{Run: "p", Where: where, Order: []Order{{Column: "reward", Desc: true}}, Offset: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer last.Release()
	if got := strs(last.Rows, "reward"); len(got) != 1 || got[0] != "(null)" || strs(last.Rows, "task_id")[0] != "task-11" {
		t.Fatalf("last row %v %v", got, strs(last.Rows, "task_id"))
	}
	if _, err := ReadAttempts(ctx, st, PageOptions{Run: "p", Order: []Order{{Column: "rewrad"}}}); err == nil || !strings.Contains(err.Error(), "reward") {
		t.Fatalf("unknown column: %v", err)
	}
}

// ReadPage of one partition reads only its objects; a damaged object,
// tolerated, is named with its error and the other objects' rows stay.
func TestReadPageDamagedAndPartition(t *testing.T) {
	st := testinfra.FreshStore(t)
	seedAttempts(t, st)
	ctx := context.Background()
	one := 1
	p, err := ReadPage(ctx, st, schemas.RewardsTable, PageOptions{Run: "p", Partition: &one, Select: []string{"iteration"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 11 || strings.Join(strs(p.Rows, "iteration"), "") != strings.Repeat("1", 11) {
		t.Fatalf("partition 1: %d rows %v", p.Total, strs(p.Rows, "iteration"))
	}
	p.Release()
	objs, err := schemas.TableObjects(ctx, st, "p", schemas.RewardsTable)
	if err != nil || len(objs) != 2 {
		t.Fatalf("objects %v: %v", objs, err)
	}
	bad := []byte("PAR1 this is no parquet PAR1")
	if _, err := st.Put(ctx, objs[0], bytes.NewReader(bad), int64(len(bad)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPage(ctx, st, schemas.RewardsTable, PageOptions{Run: "p"}); err == nil || !strings.Contains(err.Error(), objs[0]) {
		t.Fatalf("strict read of a damaged object: %v", err)
	}
	p, err = ReadAttempts(ctx, st, PageOptions{Run: "p", Tolerate: true, Select: []string{"iteration", "reward"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if len(p.Damaged) != 1 || p.Damaged[0].Key != objs[0] || p.Damaged[0].Err == "" {
		t.Fatalf("damaged %+v", p.Damaged)
	}
	// Both iterations' attempts are listed; only the intact partition's
	// have rewards.
	rewards := p.Rows.Column(1).(*array.Float64)
	if p.Total != 24 || rewards.NullN() != 13 {
		t.Fatalf("%d attempts, %d without reward", p.Total, rewards.NullN())
	}
}
