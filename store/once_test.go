package store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/store/errorstore"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

func sumOf(data []byte) store.Sum {
	h := sha256.Sum256(data)
	return store.Sum{Size: int64(len(data)), SHA256: hex.EncodeToString(h[:])}
}

// The first writer's bytes are the key's for good: a later writer gets
// them back, not its own.
func TestPutOnce(t *testing.T) {
	ctx := context.Background()
	st := testinfra.FreshStore(t)
	got, mine, err := store.PutOnce(ctx, st, "k", []byte("first"), store.PutOptions{ContentType: "application/json"})
	if err != nil || !mine || string(got) != "first" {
		t.Fatalf("first put: %q, mine %v, %v", got, mine, err)
	}
	got, mine, err = store.PutOnce(ctx, st, "k", []byte("second, longer"), store.PutOptions{})
	if err != nil || mine || string(got) != "first" {
		t.Fatalf("second put: %q, mine %v, %v; want the first writer's bytes", got, mine, err)
	}
	if info, err := st.Stat(ctx, "k"); err != nil || info.Size != 5 || info.ContentType != "application/json" {
		t.Fatalf("stored %+v, %v", info, err)
	}
	if _, _, err := store.PutOnce(ctx, st, "big", make([]byte, store.MaxOnceBytes+1), store.PutOptions{}); err == nil {
		t.Fatal("stored more than MaxOnceBytes")
	}
}

// A store failure, whether on the put or reading the other writer's
// object back, is an error that wraps it: nothing was learnt to announce.
func TestPutOnceStoreFailures(t *testing.T) {
	ctx := context.Background()
	st := testinfra.FreshStore(t)
	if _, err := st.Put(ctx, "taken", strings.NewReader("theirs"), 6, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []errorstore.Fault{
		{Op: errorstore.PutIfAbsent},
		{Op: errorstore.PutIfAbsent, After: true},
		{Op: errorstore.Get},
		{Op: errorstore.Get, After: true},
	} {
		es := errorstore.New(st, f)
		if _, _, err := store.PutOnce(ctx, es, "taken", []byte("mine"), store.PutOptions{}); !errors.Is(err, errorstore.ErrInjected) {
			t.Errorf("%+v: %v, want the injected error", f, err)
		}
	}
	// A put that took effect though it reported failure: the retry finds
	// the object and takes it.
	es := errorstore.New(st, errorstore.Fault{Op: errorstore.PutIfAbsent, After: true})
	if _, _, err := store.PutOnce(ctx, es, "lost-reply", []byte("v1"), store.PutOptions{}); !errors.Is(err, errorstore.ErrInjected) {
		t.Fatal(err)
	}
	es.Heal()
	got, mine, err := store.PutOnce(ctx, es, "lost-reply", []byte("v2"), store.PutOptions{})
	if err != nil || mine || string(got) != "v1" {
		t.Fatalf("retry: %q, mine %v, %v; want the stored v1", got, mine, err)
	}
	if n := es.Count(errorstore.PutIfAbsent); n != 2 {
		t.Fatalf("%d PutIfAbsent calls", n)
	}
}

func TestPutOnceSum(t *testing.T) {
	ctx := context.Background()
	st := testinfra.FreshStore(t)
	a, b := []byte("snapshot a"), []byte("snapshot b, another episode")
	got, mine, err := store.PutOnceSum(ctx, st, "s", bytes.NewReader(a), sumOf(a), store.PutOptions{ContentType: "application/x-tar", Metadata: map[string]string{"x": "1"}})
	if err != nil || !mine || got != sumOf(a) {
		t.Fatalf("first put: %+v, mine %v, %v", got, mine, err)
	}
	info, err := st.Stat(ctx, "s")
	if err != nil || info.Metadata[store.SHA256Metadata] != sumOf(a).SHA256 || info.Metadata["x"] != "1" {
		t.Fatalf("stored %+v, %v", info, err)
	}
	got, mine, err = store.PutOnceSum(ctx, st, "s", bytes.NewReader(b), sumOf(b), store.PutOptions{})
	if err != nil || mine || got != sumOf(a) {
		t.Fatalf("second put: %+v, mine %v, %v; want the first writer's %+v", got, mine, err, sumOf(a))
	}
	// An object stored some other way carries no hash to announce.
	if _, err := st.Put(ctx, "plain", bytes.NewReader(a), int64(len(a)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.PutOnceSum(ctx, st, "plain", bytes.NewReader(a), sumOf(a), store.PutOptions{}); err == nil {
		t.Fatal("took an object without a recorded hash")
	}
	for _, f := range []errorstore.Fault{{Op: errorstore.PutIfAbsent}, {Op: errorstore.Stat}} {
		if _, _, err := store.PutOnceSum(ctx, errorstore.New(st, f), "s", bytes.NewReader(b), sumOf(b), store.PutOptions{}); !errors.Is(err, errorstore.ErrInjected) {
			t.Errorf("%+v: %v, want the injected error", f, err)
		}
	}
}
