package episode

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/pipeline"
)

// The oracle replays the reference solution through the harness and the
// verifier judges what it left; the rows are those a rollout stores.
func TestPlayOracle(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap unavailable (make setup installs it)")
	}
	cfg := config.Default()
	rows := filepath.Join(t.TempDir(), "rows.json")
	var out bytes.Buffer
	o := Options{StandaloneOptions: pipeline.StandaloneOptions{Policy: "oracle", MaxTurns: 300, Seed: 1}, Task: "../harbor/testdata/tasks/log-rotate", Backend: "bwrap", Rows: rows, Verify: true}
	if err := Play(context.Background(), &out, cfg, o); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"=== task ", "--- turn 0", "=== task_complete after", "passed 5/5, solved true, reward 5"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("transcript lacks %q:\n%s", want, out.String())
		}
	}
	data, err := os.ReadFile(rows)
	if err != nil || !json.Valid(data) {
		t.Fatalf("rows: %v", err)
	}
}

func TestWriteTurn(t *testing.T) {
	var b bytes.Buffer
	writeTurn(&b, agent.Turn{Index: 2, Chunk: 1, Sampled: 9, Reply: " ls \n", Observation: "a\nb"})
	if want := "--- turn 2 (chunk 1, 9 tokens)\nassistant: ls\nobservation:\na\nb\n"; b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}
