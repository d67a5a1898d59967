package testinfra

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/store/errorstore"
)

// Recorder is an engine.Emitter that keeps what a handler emitted, for
// tests that call handlers directly. Its events carry the type, the run
// and the payload, and ids unique within the test binary; emit options
// are not kept.
type Recorder struct {
	Run    string
	Events []engine.Event
}

var recorded atomic.Int64

// Emit implements engine.Emitter.
func (r *Recorder) Emit(typ string, payload any, _ ...engine.EmitOption) (engine.Event, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return engine.Event{}, engine.Permanent(err)
	}
	ev := engine.Event{ID: typ + "#" + strconv.FormatInt(recorded.Add(1), 10), Type: typ, Run: r.Run, Payload: b}
	r.Events = append(r.Events, ev)
	return ev, nil
}

// RootEvent is engine.NewRootEvent for a test: an error fails it.
func RootEvent(t testing.TB, run, typ, key string, payload any) engine.Event {
	t.Helper()
	ev, err := engine.NewRootEvent(run, typ, key, payload)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// Feed has s handle each event in turn, as a runner delivers them, and
// returns what they emitted; a handler's failure fails the test.
func Feed(t testing.TB, s engine.Stage, evs ...engine.Event) []engine.Event {
	t.Helper()
	var rec Recorder
	for _, ev := range evs {
		rec.Run = ev.Run
		if err := s.Handle(context.Background(), ev, &rec); err != nil {
			t.Fatalf("%s: %v", ev.Type, err)
		}
	}
	return rec.Events
}

// FailsRetryably has s handle ev on a store that the test made fail and
// checks that the handler fails with a retryable error wrapping the
// store's.
func FailsRetryably(t testing.TB, s engine.Stage, ev engine.Event) {
	t.Helper()
	err := s.Handle(context.Background(), ev, &Recorder{Run: ev.Run})
	if err == nil {
		t.Fatal("the handler succeeded on a failing store")
	}
	retryable(t, err)
}

func retryable(t testing.TB, err error) {
	t.Helper()
	switch {
	case engine.IsPermanent(err):
		t.Fatalf("a store fault failed the event for good: %v", err)
	case !errors.Is(err, errorstore.ErrInjected):
		t.Fatalf("the handler's error does not wrap the store's: %v", err)
	}
}

// StoreFaults tests a handler's store-failure paths. Run handles Event
// once on a healthy store (FreshStore), which must succeed, and then, on a
// fresh store for each, once with each call that healthy run made failing: failing
// before it reaches the store and, for every call but Stat, after (a
// write that took effect though its caller saw an error, a body that
// breaks off). The handler must then fail with a retryable error that
// wraps the injected one — the runner publishes nothing of a handler that
// fails, so no event claims what was not stored — or succeed as the
// healthy run did. A retry on the healed store must succeed with the
// healthy run's events. Whatever events a run emits, every object they
// name with a key and a SHA-256 must be stored with that size and hash.
type StoreFaults struct {
	// Setup stores what the handler reads; it gets the bare store, whose
	// calls are not counted. Nil stores nothing.
	Setup func(t *testing.T, st store.ObjectStore)
	// Stage builds the stage under test on st, once per case: a retry
	// reaches the same stage, as a redelivery reaches the same process.
	// It may handle events that bring the stage to the state Event is
	// handled in; faults apply to Event's handling only.
	Stage func(t *testing.T, st store.ObjectStore) engine.Stage
	// Event is the event handled.
	Event engine.Event
	// Normalize, when set, maps a payload to the form compared with the
	// healthy run's, e.g. to drop what depends on the wall clock.
	Normalize func(t *testing.T, ev engine.Event) any
}

// Run runs the cases as subtests of t and returns the healthy run's
// events. The healthy run comes first; the faulty ones, each on a store and
// stage of its own, run in parallel after the caller's test function
// returns.
func (c StoreFaults) Run(t *testing.T) []engine.Event {
	t.Helper()
	var calls []errorstore.Call
	var want []engine.Event
	t.Run("healthy", func(t *testing.T) {
		es, s := c.start(t)
		before := len(es.Calls())
		want = c.handle(t, s, es, nil)
		// The handler's calls, numbered as a fault injected now counts them.
		n := map[errorstore.Op]int{}
		for _, call := range es.Calls()[before:] {
			n[call.Op]++
			call.N = n[call.Op]
			calls = append(calls, call)
		}
	})
	if t.Failed() {
		return nil
	}
	for _, call := range calls {
		for _, after := range []bool{false, true} {
			if after && call.Op == errorstore.Stat {
				continue
			}
			name := fmt.Sprintf("%s#%d", call.Op, call.N)
			if after {
				name += "-after"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				es, s := c.start(t)
				es.Inject(errorstore.Fault{Op: call.Op, N: call.N, After: after})
				rec := &Recorder{Run: c.Event.Run}
				err := s.Handle(context.Background(), c.Event, rec)
				if len(es.Injected()) == 0 {
					t.Fatalf("the handler no longer makes call %s (calls %v)", call, es.Calls())
				}
				if err == nil {
					// The handler did without the call, or repeated it.
					c.same(t, want, rec.Events)
					c.claims(t, es, rec.Events)
				} else {
					retryable(t, err)
				}
				es.Heal()
				c.same(t, want, c.handle(t, s, es, err))
			})
		}
	}
	return want
}

func (c StoreFaults) start(t *testing.T) (*errorstore.Store, engine.Stage) {
	t.Helper()
	bare := FreshStore(t)
	if c.Setup != nil {
		c.Setup(t, bare)
	}
	es := errorstore.New(bare)
	return es, c.Stage(t, es)
}

// handle handles the event, which must succeed, and checks its claims.
// prev is the error of the delivery before, for the failure message.
func (c StoreFaults) handle(t *testing.T, s engine.Stage, es *errorstore.Store, prev error) []engine.Event {
	t.Helper()
	rec := &Recorder{Run: c.Event.Run}
	start := time.Now()
	if err := s.Handle(context.Background(), c.Event, rec); err != nil {
		if prev != nil {
			t.Fatalf("after %v, the retry failed: %v", prev, err)
		}
		t.Fatal(err)
	}
	t.Logf("handled in %s", time.Since(start).Round(time.Millisecond))
	c.claims(t, es, rec.Events)
	return rec.Events
}

func (c StoreFaults) same(t *testing.T, want, got []engine.Event) {
	t.Helper()
	norm := func(evs []engine.Event) string {
		var parts []any
		for _, ev := range evs {
			var p any = ev.Payload
			if c.Normalize != nil {
				p = c.Normalize(t, ev)
			}
			parts = append(parts, []any{ev.Type, p})
		}
		b, err := json.Marshal(parts)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if w, g := norm(want), norm(got); w != g {
		t.Fatalf("emitted\n%s\nwant, as the healthy run did,\n%s", g, w)
	}
}

// claims checks that every object the events name with a key and a
// SHA-256 is stored with that hash (and size, where named).
func (c StoreFaults) claims(t *testing.T, es *errorstore.Store, evs []engine.Event) {
	t.Helper()
	for _, ev := range evs {
		var v any
		if err := json.Unmarshal(ev.Payload, &v); err != nil {
			t.Fatalf("%s: %v", ev.Type, err)
		}
		for _, ref := range refs(v, nil) {
			rc, _, err := es.Unwrap().Get(context.Background(), ref.key)
			if err != nil {
				t.Fatalf("%s claims %s: %v", ev.Type, ref.key, err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatalf("%s claims %s: %v", ev.Type, ref.key, err)
			}
			sum := sha256.Sum256(data)
			if hex.EncodeToString(sum[:]) != ref.sha256 || (ref.size >= 0 && int64(len(data)) != ref.size) {
				t.Fatalf("%s claims %s holds %d bytes of SHA-256 %s; it holds %d of %x", ev.Type, ref.key, ref.size, ref.sha256, len(data), sum)
			}
		}
	}
}

type claim struct {
	key, sha256 string
	size        int64
}

// refs collects the objects of a decoded JSON value that have a "key" and
// a "sha256".
func refs(v any, out []claim) []claim {
	switch v := v.(type) {
	case map[string]any:
		key, _ := v["key"].(string)
		sum, _ := v["sha256"].(string)
		if key != "" && sum != "" {
			size := int64(-1)
			if n, ok := v["bytes"].(float64); ok {
				size = int64(n)
			}
			out = append(out, claim{key, sum, size})
		}
		for _, x := range v {
			out = refs(x, out)
		}
	case []any:
		for _, x := range v {
			out = refs(x, out)
		}
	}
	return out
}
