package query

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
)

// t1 query over every row of a default run's rewards table (about 500
// attempts, one object each as the reward stage writes them), before and
// after its iteration is compacted.
func BenchmarkQueryRewards(b *testing.B) {
	ctx := context.Background()
	st := testinfra.Store(b)
	const attempts = 519
	for i := range attempts {
		row := schemas.RewardRow{Run: "bench", TaskID: fmt.Sprintf("task-%03d", i/3), Attempt: int32(i % 3), Iteration: 1,
			Purpose: "train", Assertions: []schemas.Assertion{{Name: "a", Passed: true}, {Name: "b"}}, Passed: 1, Total: 2, Scale: 1, Reward: 1}
		if _, err := schemas.WriteTable(ctx, st, "bench", 1, []schemas.RewardRow{row}, schemas.WriterOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	read := func(b *testing.B) {
		for b.Loop() {
			if err := Run(ctx, st, schemas.RewardsTable, Options{Run: "bench", Format: "csv"}, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run(fmt.Sprintf("objects=%d", attempts), read)
	if _, err := schemas.Compact(ctx, st, "bench", schemas.RewardsTable, 1, schemas.WriterOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Run("compacted", read)
}
