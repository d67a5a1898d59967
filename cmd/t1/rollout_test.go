package main

import (
	"os/exec"
	"strings"
	"testing"
)

func TestRolloutOracleTranscript(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap unavailable (make setup installs it)")
	}
	out, err := t1(t, "rollout", "--task", "../../harbor/testdata/tasks/log-rotate", "--policy", "oracle")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"=== task ", "--- turn 0", "=== task_complete after", "passed 5/5, solved true, reward 5"} {
		if !strings.Contains(out, want) {
			t.Fatalf("transcript lacks %q:\n%s", want, out)
		}
	}
}
