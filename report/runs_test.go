package report

import (
	"bytes"
	"regexp"
	"testing"
	"time"

	"github.com/t1pipe/t1/schemas"
)

// A branch's row names its parent and where it left it: the stage, the
// iteration a continued branch went on from, and each setting it changed.
func TestWriteRuns(t *testing.T) {
	var b bytes.Buffer
	if err := WriteRuns(&b, nil); err != nil || b.String() != "no runs in the log\n" {
		t.Fatalf("%q %v", b.String(), err)
	}
	b.Reset()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	err := WriteRuns(&b, []RunLine{
		{Run: "main", Status: "completed", Iterations: 3, Planned: 3, PolicyVersions: []int64{1, 2, 3, 4}, Events: 900, LastEvent: at},
		{Run: "main-fixed", Status: "running", Parent: "main", Iterations: 1, Planned: 3, PolicyVersions: []int64{3},
			Branch: &schemas.BranchPoint{Stage: "reward", Iteration: 1, Continue: true, Overrides: []schemas.Override{{Key: "reward_scale", Value: "2", Parent: "1"}}}},
		{Run: "main-sft", Status: "replayed", Parent: "main", Branch: &schemas.BranchPoint{Stage: "sft", Continue: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`main +completed +– +– +3/3 +v1 v2 v3 v4 +900 +2026-12-01T00:00:00Z\n`,
		`main-fixed +running +main +reward @ iteration 1, continued; reward_scale 2 \(was 1\) +1/3 +v3 +0 +–\n`,
		`main-sft +replayed +main +sft, continued +0/0 +0 +–\n`,
	} {
		if !regexp.MustCompile(want).MatchString(b.String()) {
			t.Errorf("no line %q in\n%s", want, b.String())
		}
	}
}

func TestRunListWriteText(t *testing.T) {
	var b bytes.Buffer
	if err := RunList(nil).WriteText(&b); err != nil || b.String() != "no runs in the log\n" {
		t.Fatalf("%q %v", b.String(), err)
	}
}
