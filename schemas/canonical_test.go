package schemas

import (
	"context"
	"testing"

	"github.com/t1pipe/t1/keys"
)

// Rows that differ only in wall-clock columns share one object: the
// second write keeps the first object and returns its claim check, which
// still verifies. Any other difference is another object.
func TestWallClockColumnsStayOutOfKeys(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	turns := func(action string, took int64) []TurnRow {
		return []TurnRow{
			{Run: "wc", TaskID: "t", Turn: 0, Action: action, StartMS: 0, DurationMS: took},
			{Run: "wc", TaskID: "t", Turn: 1, Action: "ls", StartMS: took, DurationMS: 2 * took},
		}
	}
	first, err := WriteTable(ctx, st, "wc", 0, turns("cd /app", 120), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := WriteTable(ctx, st, "wc", 0, turns("cd /app", 4500), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Fatalf("rows differing in timings only: %+v, then %+v", first, again)
	}
	rows, err := ReadRows[TurnRow](ctx, st, again.Key, &again)
	if err != nil {
		t.Fatal(err)
	}
	if rows[1].DurationMS != 240 {
		t.Fatalf("the stored object is not the first one: %+v", rows[1])
	}
	other, err := WriteTable(ctx, st, "wc", 0, turns("cd /tmp", 120), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if other.Key == first.Key {
		t.Fatal("rows with another action share the key")
	}
	// Tables without wall-clock columns stay addressed by their bytes.
	ref, err := WriteTable(ctx, st, "wc", 0, []RewardRow{{Run: "wc", TaskID: "t", Reward: 1}}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := keys.TableObject("wc", RewardsTable.Name, RewardsTable.Dir, 0, ref.SHA256); ref.Key != want {
		t.Fatalf("rewards key %s, want %s", ref.Key, want)
	}
}
