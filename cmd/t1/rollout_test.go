package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/t1pipe/t1/episode"
)

func TestRolloutOracleTranscript(t *testing.T) {
	t.Parallel()
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

// Under --json the episode is one JSON object: its turns, how it ended and
// the verifier's verdict, and nothing else on stdout.
func TestRolloutJSON(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap unavailable (make setup installs it)")
	}
	out, err := t1(t, "rollout", "--task", "../../harbor/testdata/tasks/log-rotate", "--policy", "oracle", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var sum episode.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if sum.Termination != "task_complete" || len(sum.Turns) == 0 || !strings.Contains(sum.Turns[0].Reply, "<command>") ||
		sum.Verifier == nil || sum.Verifier.Passed != 5 || !sum.Verifier.Solved {
		t.Fatalf("%+v", sum)
	}
}
