package update

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// stored writes a one-chunk batch of run at iteration 2, policy version 1.
func stored(t *testing.T, st store.ObjectStore, run string) schemas.ObjectRef {
	t.Helper()
	rec, err := routing.NewRecord(3, 1, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := schemas.NewRoutingRow(run, "t", 0, 0, rec, routing.Packed)
	if err != nil {
		t.Fatal(err)
	}
	rows := batch.Rows{
		Tokens:       []schemas.TokenRow{{Run: run, TaskID: "t", TokenIDs: []int32{1, 2, 3}, LogProbs: make([]float32, 3), LossMask: []bool{false, true, true}}},
		Routing:      []schemas.RoutingRow{rr},
		Rewards:      []schemas.RewardRow{{Run: run, TaskID: "t", Reward: 1}},
		Trajectories: []schemas.TrajectoryRow{{Run: run, TaskID: "t", Chunks: 1}},
	}
	_, ref, err := batch.Write(context.Background(), st, run, 2, 1, schemas.ModelDims{Vocab: 8, Layers: 1, TopK: 1, Experts: 2}, rows)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func TestRead(t *testing.T) {
	ctx := context.Background()
	st := testinfra.Store(t)
	ref := stored(t, st, "parent")
	v := int64(1)
	claim := Claim{Event: schemas.CriticUpdated, Manifest: ref, Iteration: 2, PolicyVersion: &v}

	in, err := Read(ctx, st, nil, "parent", claim)
	if err != nil || in.Manifest.Run != "parent" || len(in.Runs) != 1 {
		t.Fatalf("%+v, %v", in, err)
	}
	// A branch is handed its parent's batch and makes it its own.
	branch := Lineage(func(context.Context, string) ([]string, error) { return []string{"branch", "parent"}, nil })
	in, err = Read(ctx, st, branch, "branch", claim)
	if err != nil || in.Manifest.Run != "branch" || len(in.Runs) != 2 {
		t.Fatalf("branch: %+v, %v", in, err)
	}

	for name, c := range map[string]struct {
		run   string
		claim func(*Claim)
		want  string
	}{
		"another run":       {"other", func(*Claim) {}, "is for run parent iteration 2 policy 1, the event for run other"},
		"another iteration": {"parent", func(c *Claim) { c.Iteration = 3 }, "iteration 3 policy 1"},
		"another policy":    {"parent", func(c *Claim) { c.PolicyVersion = new(int64(0)) }, "iteration 2 policy 0"},
		"no manifest":       {"parent", func(c *Claim) { c.Manifest = schemas.ObjectRef{} }, "critic.updated: no batch manifest"},
		"another manifest":  {"parent", func(c *Claim) { c.Manifest.SHA256 = strings.Repeat("0", 64) }, "critic.updated: "},
	} {
		c2 := claim
		c.claim(&c2)
		if _, err := Read(ctx, st, nil, c.run, c2); !batch.IsBad(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a bad input saying %q", name, err, c.want)
		}
	}
	// Without a claimed policy version, the manifest's is not checked.
	claim.PolicyVersion = nil
	if _, err := Read(ctx, st, nil, "parent", claim); err != nil {
		t.Fatal(err)
	}

	// A lineage that cannot be read is retried, not bad input.
	down := Lineage(func(context.Context, string) ([]string, error) { return nil, errors.New("log unreachable") })
	if _, err := Read(ctx, st, down, "branch", claim); err == nil || batch.IsBad(err) {
		t.Fatalf("lineage down: %v", err)
	}
}
