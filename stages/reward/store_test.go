package reward

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// Every store call of scoring an attempt failing, before or after it
// reaches the store, fails the delivery retryably, and the retry scores
// the attempt as a healthy store lets it.
func TestStoreFaults(t *testing.T) {
	ctx := context.Background()
	bw := testinfra.Bubblewrap(t)
	tk, snap, ref := solvedGreet(t, bw)
	ev := testinfra.RootEvent(t, "rw", schemas.RolloutCompleted, "greet", schemas.RolloutCompletedPayload{
		TaskID: "greet", Purpose: "train", Snapshot: ref,
	})
	want := testinfra.StoreFaults{
		Setup: func(t *testing.T, st store.ObjectStore) {
			if _, _, _, err := trial.PutBundle(ctx, st, "rw", "greet", tk); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Put(ctx, ref.Key, bytes.NewReader(snap), ref.Bytes, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		Stage: func(t *testing.T, st store.ObjectStore) engine.Stage {
			s, err := New(Config{Store: st, Trial: trial.Options{Backend: bw}, Settings: Settings{Mode: verifier.ModeCount, Scale: 1}, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Event: ev,
	}.Run(t)
	var p schemas.RewardScoredPayload
	if len(want) != 1 || want[0].Decode(&p) != nil || p.Reward != 1 {
		t.Fatalf("healthy run scored %v", want)
	}
}

// solvedGreet is a one-assertion task and the snapshot of an attempt at
// it that solved it, referenced as run rw's training attempt.
func solvedGreet(t *testing.T, bw sandbox.Backend) (*harbor.Task, []byte, schemas.ObjectRef) {
	t.Helper()
	ctx := context.Background()
	tk, err := harbor.NewBuilder("greet").Instruction("Write hi to /app/out/hi.txt.\n").
		Solution("#!/bin/bash\nmkdir -p /app/out\necho hi > /app/out/hi.txt\n").
		TestScript("#!/bin/bash\ntest \"$(cat /app/out/hi.txt)\" = hi\n").Build()
	if err != nil {
		t.Fatal(err)
	}
	// The attempt's final state: the solution's work.
	dir := filepath.Join(t.TempDir(), "greet")
	if err := tk.Write(dir); err != nil {
		t.Fatal(err)
	}
	sb, err := bw.Start(ctx, sandbox.Spec{TaskDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if res, err := sb.Exec(ctx, sandbox.Cmd{Script: "mkdir -p /app/out && echo hi > /app/out/hi.txt"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("solve: %v %+v", err, res)
	}
	var snap bytes.Buffer
	if err := sb.Snapshot(ctx, &snap); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(snap.Bytes())
	ref := schemas.ObjectRef{Key: keys.Snapshot("rw", keys.Attempt{Purpose: "train", Task: "greet"}), Bytes: int64(snap.Len()), SHA256: hex.EncodeToString(sum[:])}
	return tk, snap.Bytes(), ref
}
