package main

import (
	"reflect"
	"testing"

	"github.com/t1pipe/t1/engine"
)

func TestFailedCountsByRunAndType(t *testing.T) {
	counts := countRows(engine.Counts{
		"r1": {"rollout.requested": 4, "rollout.requested.failed": 2, "rollout.completed.failed": 1},
		"r2": {"task.synthesized.failed": 3, "task.audited": 5},
	})
	want := []eventCount{
		{Run: "r1", Type: "rollout.completed", Count: 1},
		{Run: "r1", Type: "rollout.requested", Count: 2},
		{Run: "r2", Type: "task.synthesized", Count: 3},
	}
	if got := failedCounts(counts); !reflect.DeepEqual(got, want) {
		t.Fatalf("failed counts %+v, want %+v", got, want)
	}
}
