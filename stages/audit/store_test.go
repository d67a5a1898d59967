package audit

import (
	"context"
	"os"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// Every store call of an audit failing, before or after it reaches the
// store, fails the delivery retryably, and the retry reaches the healthy
// run's verdict.
func TestStoreFaults(t *testing.T) {
	bw := testinfra.Bubblewrap(t)
	tk, err := harbor.NewBuilder("greet").Instruction("Write `hi` to `/app/out/hi.txt`.\n").
		Solution("#!/bin/bash\nmkdir -p /app/out\necho hi > /app/out/hi.txt\n").
		TestScript("#!/bin/bash\ntest \"$(cat /app/out/hi.txt)\" = hi\n").Build()
	if err != nil {
		t.Fatal(err)
	}
	data, sum, err := tk.BundleBytes()
	if err != nil {
		t.Fatal(err)
	}
	ev := testinfra.RootEvent(t, "au", schemas.TaskSynthesized, "greet", schemas.TaskSynthesizedPayload{
		TaskID: "greet", Bundle: schemas.ObjectRef{Key: keys.Bundle("au", "greet"), Bytes: int64(len(data)), SHA256: sum},
	})
	testinfra.StoreFaults{
		Setup: func(t *testing.T, st store.ObjectStore) {
			if _, _, _, err := trial.PutBundle(context.Background(), st, "au", "greet", tk); err != nil {
				t.Fatal(err)
			}
		},
		Stage: func(t *testing.T, st store.ObjectStore) engine.Stage {
			return NewStage(StageConfig{Store: st, Trial: trial.Options{Backend: bw}, Settings: DefaultSettings(), TempDir: t.TempDir()})
		},
		Event: ev,
	}.Run(t)
}
