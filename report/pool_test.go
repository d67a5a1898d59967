package report

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
)

// The summary counts only the pool's tasks, orders histograms largest
// first, and takes the top-five share over the five largest categories.
func TestSummarisePool(t *testing.T) {
	var rows []schemas.TaskRow
	var ids []string
	add := func(id, cat, diff string) {
		rows = append(rows, schemas.TaskRow{TaskID: id, Category: cat, Difficulty: diff})
		ids = append(ids, id)
	}
	for i, cat := range []string{"a", "a", "a", "b", "b", "c", "d", "e", "f", "g"} {
		add(string(rune('0'+i)), cat, map[bool]string{true: "easy", false: "hard"}[i%3 == 0])
	}
	p := schemas.PoolSealedPayload{PoolVersion: 2, TaskIDs: append(ids, "gone"), Excluded: 1}
	s := summarisePool("r", p, rows)
	if s.Tasks != 11 || s.Version != 2 || s.Excluded != 1 {
		t.Fatalf("header: %+v", s)
	}
	if len(s.Missing) != 1 || s.Missing[0] != "gone" {
		t.Fatalf("missing: %v", s.Missing)
	}
	if c := s.Categories; len(c) != 7 || c[0].Name != "a" || c[0].Count != 3 || c[1].Name != "b" || c[2].Name != "c" {
		t.Fatalf("categories: %+v", c)
	}
	// a, b, c, d, e hold 3+2+1+1+1 of 10 rows.
	if s.TopFiveShare != 0.8 {
		t.Fatalf("top-five share %v, want 0.8", s.TopFiveShare)
	}
	if d := s.Difficulties; len(d) != 2 || d[0].Name != "hard" || d[0].Count != 6 || d[1].Count != 4 {
		t.Fatalf("difficulties: %+v", d)
	}
}

// A pool version the run never sealed is a usage error (exit 2) naming
// the versions it did; 0 reads the latest.
func TestUnknownPoolVersion(t *testing.T) {
	l := testinfra.Log(t)
	for v := 1; v <= 3; v++ {
		publish(t, l, "pv", schemas.PoolSealed, fmt.Sprintf("seal-%d", v), schemas.PoolSealedPayload{PoolVersion: v, Tasks: v})
	}
	if p, err := sealedPool(context.Background(), l, "pv", 0); err != nil || p.PoolVersion != 3 {
		t.Fatalf("latest: %+v %v", p, err)
	}
	_, err := sealedPool(context.Background(), l, "pv", 5)
	if err == nil || exit.Code(context.Background(), err) != exit.Config || !strings.Contains(err.Error(), `unknown pool version "5"`) ||
		!strings.Contains(err.Error(), "pool versions of run pv: 1, 2, 3") {
		t.Fatalf("pool version 5: %v (exit %d)", err, exit.Code(context.Background(), err))
	}
}
