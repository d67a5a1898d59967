package rollout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/store/errorstore"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

const storeRun = "ro"

// storeRequest asks for a demonstration: the stage replays the task's
// reference solution, so the attempt needs no model.
var storeRequest = schemas.RolloutRequestedPayload{TaskID: "greet", Attempt: 0, Purpose: "sft", Seed: 1}

// storeCase is a rollout of a two-command task in a real sandbox against
// a store that the test makes fail.
func storeCase(t *testing.T) testinfra.StoreFaults {
	t.Helper()
	bw := testinfra.Bubblewrap(t)
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	tk, err := harbor.NewBuilder("greet").Instruction("Write hi to /app/out/hi.txt.\n").
		Solution("#!/bin/bash\nmkdir -p /app/out\necho hi > /app/out/hi.txt\n").
		TestScript("#!/bin/bash\ntrue\n").Build()
	if err != nil {
		t.Fatal(err)
	}
	ev := testinfra.RootEvent(t, storeRun, schemas.RolloutRequested, "greet", storeRequest)
	return testinfra.StoreFaults{
		Setup: func(t *testing.T, st store.ObjectStore) {
			if _, _, _, err := trial.PutBundle(context.Background(), st, storeRun, "greet", tk); err != nil {
				t.Fatal(err)
			}
		},
		Stage: func(t *testing.T, st store.ObjectStore) engine.Stage {
			return NewStage(StageConfig{
				Store: st, Trial: trial.Options{Backend: bw}, Episode: agent.Config{MaxTurns: 4},
				Policies: func(context.Context, string, int64) (Policy, error) { return Policy{Tokenizer: tok}, nil },
				TempDir:  t.TempDir(),
			})
		},
		Event: ev,
		// Two episodes differ in their wall-clock columns, hence in the
		// bytes of those tables, and in their snapshots' file times.
		Normalize: func(t *testing.T, ev engine.Event) any {
			var p schemas.RolloutCompletedPayload
			if err := ev.Decode(&p); err != nil {
				t.Fatal(err)
			}
			for _, r := range []*schemas.FileRef{&p.Trajectory, &p.TurnRows} {
				r.Bytes, r.SHA256 = 0, ""
			}
			p.Snapshot.Bytes, p.Snapshot.SHA256 = 0, ""
			return p
		},
	}
}

// Every store call of an attempt failing, before or after it reaches the
// store, fails the delivery retryably, and the retry announces an
// attempt that is all stored.
func TestStoreFaults(t *testing.T) {
	storeCase(t).Run(t)
}

func completed(t *testing.T, evs []engine.Event) schemas.RolloutCompletedPayload {
	t.Helper()
	if len(evs) != 1 || evs[0].Type != schemas.RolloutCompleted {
		t.Fatalf("emitted %v", evs)
	}
	var p schemas.RolloutCompletedPayload
	if err := evs[0].Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// A delivery that finds the marker stored by another one after it played
// its episode announces the stored outcome, not its own.
func TestMarkerStoredByAnotherDelivery(t *testing.T) {
	c := storeCase(t)
	st := testinfra.FreshStore(t)
	c.Setup(t, st)
	marker := keys.AttemptMarker(storeRun, storeRequest.AttemptID())
	theirs, _ := json.Marshal(schemas.RolloutCompletedPayload{TaskID: "greet", Purpose: "sft", Turns: 99, Termination: "theirs"})
	if _, err := st.Put(context.Background(), marker, bytes.NewReader(theirs), int64(len(theirs)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// The marker's check at the start misses it, as it does when the other
	// delivery stores it while this one plays.
	es := errorstore.New(st, errorstore.Fault{Op: errorstore.Get, N: 1, Key: func(k string) bool { return k == marker },
		Err: store.ErrNotFound})
	rec := &testinfra.Recorder{Run: storeRun}
	if err := c.Stage(t, es).Handle(context.Background(), c.Event, rec); err != nil {
		t.Fatal(err)
	}
	if p := completed(t, rec.Events); p.Turns != 99 || p.Termination != "theirs" {
		t.Fatalf("announced %+v, want the stored marker's outcome", p)
	}
	if es.Count(errorstore.PutIfAbsent) == 0 || len(es.Injected()) != 1 {
		t.Fatalf("calls %v", es.Calls())
	}
}

// A delivery that finds the attempt's snapshot stored by another one
// announces that snapshot's size and hash, which the stored bytes bear.
func TestSnapshotStoredByAnotherDelivery(t *testing.T) {
	c := storeCase(t)
	st := testinfra.FreshStore(t)
	c.Setup(t, st)
	theirs := []byte("another delivery's snapshot")
	sum := sha256.Sum256(theirs)
	key := keys.Snapshot(storeRun, storeRequest.AttemptID())
	if _, _, err := store.PutOnceSum(context.Background(), st, key, bytes.NewReader(theirs),
		store.Sum{Size: int64(len(theirs)), SHA256: hex.EncodeToString(sum[:])}, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	rec := &testinfra.Recorder{Run: storeRun}
	if err := c.Stage(t, st).Handle(context.Background(), c.Event, rec); err != nil {
		t.Fatal(err)
	}
	want := schemas.ObjectRef{Key: key, Bytes: int64(len(theirs)), SHA256: hex.EncodeToString(sum[:])}
	if p := completed(t, rec.Events); p.Snapshot != want {
		t.Fatalf("announced snapshot %+v, want the stored %+v", p.Snapshot, want)
	}
	// The marker holds what was announced.
	rc, _, err := st.Get(context.Background(), keys.AttemptMarker(storeRun, storeRequest.AttemptID()))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var m schemas.RolloutCompletedPayload
	if err := json.NewDecoder(rc).Decode(&m); err != nil || m.Snapshot != want {
		t.Fatalf("marker %+v, %v", m.Snapshot, err)
	}
}

// A training attempt samples at train_temperature and an evaluation
// attempt at the episode's temperature; the tokens rows say which, so
// the trainer takes log-probs at the temperature each reply had.
func TestTrainingAttemptsSampleAtTheTrainTemperature(t *testing.T) {
	c := storeCase(t)
	st := testinfra.FreshStore(t)
	c.Setup(t, st)
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	m, err := moe.NewModel(moe.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	eng := inference.NewReference(m, tok, moe.BF16, "v0")
	stage := NewStage(StageConfig{
		Store: st, Trial: trial.Options{Backend: testinfra.Bubblewrap(t)}, TempDir: t.TempDir(), TrainTemperature: 1.7,
		Episode: agent.Config{MaxTurns: 1, MaxNewTokens: 8, Context: 512, Sampling: inference.SamplingParams{Temperature: 0.9, TopP: 1}},
		Policies: func(context.Context, string, int64) (Policy, error) {
			return Policy{Engine: eng, Tokenizer: tok, Experts: m.Cfg.Experts}, nil
		},
	})
	for _, tc := range []struct {
		purpose string
		want    float32
	}{{schemas.PurposeTrain, 1.7}, {schemas.PurposeEval, 0.9}} {
		req := schemas.RolloutRequestedPayload{TaskID: "greet", Purpose: tc.purpose, Suite: "s", Seed: 3}
		rec := &testinfra.Recorder{Run: storeRun}
		if err := stage.Handle(context.Background(), testinfra.RootEvent(t, storeRun, schemas.RolloutRequested, tc.purpose, req), rec); err != nil {
			t.Fatal(err)
		}
		p := completed(t, rec.Events)
		rows, err := schemas.ReadRows[schemas.TokenRow](context.Background(), st, p.TokenRows.Key, &p.TokenRows)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			t.Fatalf("%s: no tokens rows", tc.purpose)
		}
		for _, r := range rows {
			if r.Temperature != tc.want {
				t.Fatalf("%s attempt sampled at temperature %v, want %v", tc.purpose, r.Temperature, tc.want)
			}
		}
	}
}
