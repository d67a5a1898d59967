package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/t1pipe/t1/trial"
)

func TestTasksValidate(t *testing.T) {
	t.Parallel()
	out, err := t1(t, "tasks", "validate", "../../harbor/testdata/tasks")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"disk-report", "log-rotate", "word-freq", "data-processing", "medium", "setup.sh", "dockerfile", "(fetches at verify time)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\nok "); n != 3 {
		t.Fatalf("%d tasks ok:\n%s", n, out)
	}

	out, err = t1(t, "tasks", "validate", "--json", "../../harbor/testdata/tasks/word-freq", "../../harbor/testdata/hostile/bad-difficulty", "../../harbor/testdata/hostile/missing-test-sh")
	if err == nil || err.Error() != "2 of 3 tasks are invalid" {
		t.Fatalf("err %v\n%s", err, out)
	}
	var checks []trial.Validation
	if err := json.Unmarshal([]byte(out), &checks); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(checks) != 3 || !checks[0].OK || checks[0].TestFunctions != 5 || checks[0].TestFiles != 1 || !checks[0].NeedsOffline ||
		!strings.HasPrefix(checks[0].ID, "task-") || checks[1].OK || !strings.Contains(checks[1].Error, "[metadata] difficulty") ||
		!strings.Contains(checks[2].Error, "tests/test.sh") {
		t.Fatalf("%+v", checks)
	}
}
