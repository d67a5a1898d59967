package errorstore_test

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/store/errorstore"
	"github.com/t1pipe/t1/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// Without faults the wrapper is the store it wraps.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.ObjectStore { return errorstore.New(testinfra.Store(t)) })
}

func put(t *testing.T, st store.ObjectStore, key, data string) error {
	t.Helper()
	_, err := st.Put(context.Background(), key, strings.NewReader(data), int64(len(data)), store.PutOptions{})
	return err
}

// A fault hits the n-th call of its operation among the keys it matches,
// and every call is counted.
func TestFaultByOpIndexAndKey(t *testing.T) {
	ctx := context.Background()
	es := errorstore.New(testinfra.Store(t),
		errorstore.Fault{Op: errorstore.Put, N: 2},
		errorstore.Fault{Op: errorstore.Get, Key: func(k string) bool { return strings.HasPrefix(k, "b/") }},
	)
	for i, key := range []string{"a/1", "a/2", "b/1"} {
		err := put(t, es, key, key)
		if (i == 1) != errors.Is(err, errorstore.ErrInjected) {
			t.Fatalf("put %d (%s): %v", i+1, key, err)
		}
	}
	if _, err := es.Unwrap().Stat(ctx, "a/2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a put failed before the store was reached, yet: %v", err)
	}
	if rc, _, err := es.Get(ctx, "a/1"); err != nil {
		t.Fatal(err)
	} else {
		rc.Close()
	}
	if _, _, err := es.Get(ctx, "b/1"); !errors.Is(err, errorstore.ErrInjected) || errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get b/1: %v", err)
	}
	if es.Count(errorstore.Put) != 3 || es.Count(errorstore.Get) != 2 || es.Count(errorstore.Stat) != 0 {
		t.Fatalf("calls %v", es.Calls())
	}
	var injected []string
	for _, c := range es.Injected() {
		injected = append(injected, c.String())
	}
	if want := []string{"Put#2(a/2)", "Get#2(b/1)"}; !slices.Equal(injected, want) {
		t.Fatalf("injected into %v, want %v", injected, want)
	}
	es.Heal()
	if _, _, err := es.Get(ctx, "b/1"); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}

// After: the call takes effect, and its caller sees the error.
func TestFaultAfter(t *testing.T) {
	ctx := context.Background()
	es := errorstore.New(testinfra.Store(t))
	boom := errors.New("boom")
	es.Inject(errorstore.Fault{Op: errorstore.PutIfAbsent, After: true, Err: boom})
	if _, err := es.PutIfAbsent(ctx, "k", strings.NewReader("v"), 1, store.PutOptions{}); !errors.Is(err, boom) {
		t.Fatalf("put: %v", err)
	}
	if _, err := es.Unwrap().Stat(ctx, "k"); err != nil {
		t.Fatalf("the put did not take effect: %v", err)
	}
	es.Inject(errorstore.Fault{Op: errorstore.Get, After: true})
	rc, _, err := es.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, errorstore.ErrInjected) {
		t.Fatalf("body: %v", err)
	}
	rc.Close()
	es.Inject(errorstore.Fault{Op: errorstore.List, After: true})
	var keys []string
	var listErr error
	for info, err := range es.List(ctx, "") {
		if err != nil {
			listErr = err
			break
		}
		keys = append(keys, info.Key)
	}
	if !slices.Equal(keys, []string{"k"}) || !errors.Is(listErr, errorstore.ErrInjected) {
		t.Fatalf("list: %v then %v", keys, listErr)
	}
	es.Inject(errorstore.Fault{Op: errorstore.Delete, After: true})
	if err := es.Delete(ctx, "k"); !errors.Is(err, errorstore.ErrInjected) {
		t.Fatalf("delete: %v", err)
	}
	if _, err := es.Unwrap().Stat(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the delete did not take effect: %v", err)
	}
}
