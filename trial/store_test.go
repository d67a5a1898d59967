package trial

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store/errorstore"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

func bundleTask(t *testing.T, instruction string) *harbor.Task {
	t.Helper()
	tk, err := harbor.NewBuilder("greet").Instruction(instruction).
		Solution("#!/bin/bash\ntrue\n").TestScript("#!/bin/bash\ntrue\n").Build()
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// A put that fails is an error that wraps the store's; one that took
// effect though it reported failure is found by the retry, which returns
// the same claim check.
func TestPutBundleStoreFailures(t *testing.T) {
	ctx := context.Background()
	tk := bundleTask(t, "Greet.\n")
	es := errorstore.New(testinfra.FreshStore(t), errorstore.Fault{Op: errorstore.PutIfAbsent})
	if _, _, _, err := PutBundle(ctx, es, "r", "greet", tk); !errors.Is(err, errorstore.ErrInjected) {
		t.Fatalf("put: %v", err)
	}
	es.Inject(errorstore.Fault{Op: errorstore.PutIfAbsent, After: true})
	if _, _, _, err := PutBundle(ctx, es, "r", "greet", tk); !errors.Is(err, errorstore.ErrInjected) {
		t.Fatalf("put: %v", err)
	}
	es.Heal()
	key, sum, size, err := PutBundle(ctx, es, "r", "greet", tk)
	if err != nil {
		t.Fatal(err)
	}
	data, want, _ := tk.BundleBytes()
	if key != keys.Bundle("r", "greet") || sum != want || size != int64(len(data)) {
		t.Fatalf("retry: %s %s %d, want %s %d", key, sum, size, want, len(data))
	}
	// A different task stored under the id first is the id's bundle: its
	// claim check is returned, not this task's.
	other := bundleTask(t, "Greet someone else.\n")
	_, osum, _, err := PutBundle(ctx, es, "r", "greet", other)
	if err != nil || osum != want {
		t.Fatalf("put of another task: %s, %v; want the stored %s", osum, err, want)
	}
}

// A store that fails while a bundle is fetched is retried: Unusable says
// no, unlike for a bundle that is not there.
func TestFetchStoreFailures(t *testing.T) {
	ctx := context.Background()
	tk := bundleTask(t, "Greet.\n")
	bare := testinfra.FreshStore(t)
	key, sum, size, err := PutBundle(ctx, bare, "r", "greet", tk)
	if err != nil {
		t.Fatal(err)
	}
	ref := schemas.ObjectRef{Key: key, Bytes: size, SHA256: sum}
	for _, f := range []errorstore.Fault{{Op: errorstore.Get}, {Op: errorstore.Get, After: true}} {
		_, _, err := Fetch(ctx, errorstore.New(bare, f), "r", "greet", ref, filepath.Join(t.TempDir(), "task"))
		if !errors.Is(err, errorstore.ErrInjected) || Unusable(err) {
			t.Errorf("%+v: %v (unusable %v), want a retryable store error", f, err, Unusable(err))
		}
	}
	if _, _, err := Fetch(ctx, bare, "r", "absent", schemas.ObjectRef{}, filepath.Join(t.TempDir(), "task")); !Unusable(err) {
		t.Errorf("a missing bundle: %v, want unusable", err)
	}
	got, _, err := Fetch(ctx, bare, "r", "greet", ref, filepath.Join(t.TempDir(), "task"))
	if err != nil || got.Instruction != tk.Instruction {
		t.Fatalf("fetch: %v", err)
	}
}
