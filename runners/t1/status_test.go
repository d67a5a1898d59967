package main

import (
	"reflect"
	"testing"
)

func TestFailedCountsByRunAndType(t *testing.T) {
	counts := countsBySubject(map[string]uint64{
		"t1.r1.rollout.requested":        4,
		"t1.r1.rollout.requested.failed": 2,
		"t1.r1.rollout.completed.failed": 1,
		"t1.r2.task.synthesized.failed":  3,
		"t1.r2.task.audited":             5,
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
