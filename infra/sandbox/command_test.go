package sandbox

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestOutcomeCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		res  Result
		want int
	}{
		{Result{ExitCode: 0}, 0}, {Result{ExitCode: 3}, 3}, {Result{ExitCode: -1, TimedOut: true}, 124},
		{Result{ExitCode: -1}, 125}, {Result{ExitCode: 300}, 125},
	} {
		if got := (Outcome{Result: c.res}).Code(); got != c.want {
			t.Errorf("%+v: code %d, want %d", c.res, got, c.want)
		}
	}
	var b bytes.Buffer
	Outcome{Result: Result{TimedOut: true, DiskExceeded: true}, timeout: time.Second, disk: 1 << 20}.WriteNotes(&b)
	if s := b.String(); !strings.Contains(s, "timed out after 1s\n") || !strings.Contains(s, "disk limit exceeded (") {
		t.Fatalf("notes: %q", s)
	}
}

// A command runs once in a sandbox that is gone afterwards.
func TestRunOnce(t *testing.T) {
	t.Parallel()
	be, err := ByName("process", true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sb, err := be.Start(ctx, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	root := sb.Info().Root
	out, err := RunOnce(ctx, sb, Cmd{Args: []string{"sh", "-c", "echo hi; exit 3"}, Timeout: 10 * time.Second})
	if err != nil || out.Code() != 3 || out.Stdout != "hi\n" || out.Backend != "process" || out.Isolated {
		t.Fatalf("%v %+v", err, out)
	}
	if _, err := sb.Exec(ctx, Cmd{Args: []string{"true"}}); err == nil {
		t.Fatalf("sandbox %s still runs commands after RunOnce", root)
	}
}
