package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/schemas"
)

// An episode's rows carry its token stream, its repairs, the sampling
// settings the log-probs are relative to, and one turn row per turn.
func TestAttemptRows(t *testing.T) {
	tp := template(t)
	pol := NewScripted(OwnChat(tp), []string{"<command>echo one</command><command>echo two</command>", "<task_complete/>"})
	res, err := Run(context.Background(), pol, OwnChat(tp), shell(t), "Say one and two.", Config{Sampling: inference.SamplingParams{Temperature: 0.8, TopP: 0.9}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := schemas.RolloutRequestedPayload{TaskID: "t", Attempt: 2, Purpose: "train", PolicyVersion: 3}
	rows, err := AttemptRows("r", p, res, 8, "snap", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows.Tokens) != 1 || len(rows.Turns) != 2 || rows.Turns[0].Action != res.Turns[0].Reply || rows.Trajectory.Turns != 2 || rows.Trajectory.SnapshotKey != "snap" {
		t.Fatalf("rows %+v", rows)
	}
	// Turn rows name the attempt's policy and purpose: evaluations of
	// several policies share an iteration's partition.
	for _, r := range rows.Turns {
		if r.Purpose != "train" || r.PolicyVersion != 3 {
			t.Fatalf("turn row %d: purpose %q, policy version %d; want train, 3", r.Turn, r.Purpose, r.PolicyVersion)
		}
	}
	tr := rows.Tokens[0]
	if !slices.Equal(tr.TokenIDs, ints32(res.Chunks[0].IDs)) || tr.StrictPrefix != 1 || tr.DriftRepair != schemas.RepairNone {
		t.Fatalf("token row %+v", tr)
	}
	// The log-probs are relative to the sampling settings, recorded beside
	// them.
	if tr.Temperature != 0.8 || tr.TopP != 0.9 {
		t.Fatalf("token row sampling settings: temperature %v, top_p %v", tr.Temperature, tr.TopP)
	}
}
