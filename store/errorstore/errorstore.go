// Package errorstore wraps a store.ObjectStore to make chosen calls fail,
// for tests of what a caller does when the store fails under it. It is
// modelled on Pebble's vfs/errorfs: a fault names an operation, the n-th
// call of it (or every call) and optionally the keys it hits; the wrapper
// records every call, so a test can assert what was called, and can heal
// the store (drop its faults) to let a retry through.
//
// A typical test runs its subject once on a healthy wrapper to learn the
// calls it makes, then once per call with that call failing: the subject
// must fail retryably, and after Heal a retry must succeed with the same
// result.
package errorstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"

	"github.com/t1pipe/t1/store"
)

// Op is a method of store.ObjectStore.
type Op int

// The operations, one per method of store.ObjectStore.
const (
	Put Op = iota
	PutIfAbsent
	Get
	GetRange
	Stat
	List
	Delete
)

var opNames = [...]string{"Put", "PutIfAbsent", "Get", "GetRange", "Stat", "List", "Delete"}

func (o Op) String() string {
	if o < 0 || int(o) >= len(opNames) {
		return fmt.Sprintf("Op(%d)", int(o))
	}
	return opNames[o]
}

// Writes reports whether the operation changes what is stored.
func (o Op) Writes() bool { return o == Put || o == PutIfAbsent || o == Delete }

// ErrInjected is what a Fault returns unless it names another error. It
// wraps neither store.ErrNotFound nor store.ErrExists: to the caller it is
// the store failing, as an outage or a dropped connection would.
var ErrInjected = errors.New("errorstore: injected error")

// Call is one call of the store as the wrapper saw it.
type Call struct {
	Op Op
	// Key is the key, or List's prefix.
	Key string
	// N counts the calls of Op, this one included: the first is 1.
	N int
	// Err is the error injected into the call, nil when none was.
	Err error
}

func (c Call) String() string { return fmt.Sprintf("%s#%d(%s)", c.Op, c.N, c.Key) }

// Fault makes the calls it matches fail.
type Fault struct {
	Op Op
	// N picks the N-th matching call of Op since the fault was injected
	// (1 is the first); 0 picks every one.
	N int
	// Key, when set, restricts the fault to calls whose key (List: its
	// prefix) it accepts; N then counts only those.
	Key func(key string) bool
	// After lets the call reach the wrapped store before it fails: a
	// write that took effect though its caller sees it fail (the reply
	// lost on the way back), a Get whose object opens but whose body fails
	// on the first read, a List that yields every object and then the
	// error; the wrapped store's own errors (a Get of a missing key) come
	// back as they are. Without After, and for Stat always, the wrapped
	// store is not called.
	After bool
	// Err is the error injected; nil means ErrInjected.
	Err error
}

// Store is an ObjectStore that passes calls to the store it wraps,
// failing those its faults pick. It is safe for concurrent use.
type Store struct {
	inner store.ObjectStore

	mu     sync.Mutex
	faults []fault
	calls  []Call
	counts [len(opNames)]int
}

type fault struct {
	Fault
	seen int
}

var _ store.ObjectStore = (*Store)(nil)

// New wraps st, injecting faults.
func New(st store.ObjectStore, faults ...Fault) *Store {
	s := &Store{inner: st}
	s.Inject(faults...)
	return s
}

// Inject replaces the store's faults; their counts start afresh.
func (s *Store) Inject(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = s.faults[:0]
	for _, f := range faults {
		if f.Err == nil {
			f.Err = ErrInjected
		}
		s.faults = append(s.faults, fault{Fault: f})
	}
}

// Heal drops every fault: later calls all reach the wrapped store.
func (s *Store) Heal() { s.Inject() }

// Calls returns every call so far, in the order they were made.
func (s *Store) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Count is how many calls of op were made.
func (s *Store) Count(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

// Injected lists the calls a fault picked.
func (s *Store) Injected() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.Err != nil {
			out = append(out, c)
		}
	}
	return out
}

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() store.ObjectStore { return s.inner }

// call records a call and returns the fault it gets, if any.
func (s *Store) call(op Op, key string) (after bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[op]++
	c := Call{Op: op, Key: key, N: s.counts[op]}
	for i := range s.faults {
		f := &s.faults[i]
		if f.Op != op || (f.Key != nil && !f.Key(key)) {
			continue
		}
		f.seen++
		if f.N == 0 || f.N == f.seen {
			c.Err, after = fmt.Errorf("%s %s: %w", op, key, f.Err), f.After
			break
		}
	}
	s.calls = append(s.calls, c)
	return after, c.Err
}

// Put implements store.ObjectStore.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	return s.put(Put, s.inner.Put, ctx, key, r, size, opts)
}

// PutIfAbsent implements store.ObjectStore.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	return s.put(PutIfAbsent, s.inner.PutIfAbsent, ctx, key, r, size, opts)
}

type putFunc func(context.Context, string, io.Reader, int64, store.PutOptions) (store.ObjectInfo, error)

func (s *Store) put(op Op, put putFunc, ctx context.Context, key string, r io.Reader, size int64, opts store.PutOptions) (store.ObjectInfo, error) {
	after, ferr := s.call(op, key)
	if ferr != nil && !after {
		return store.ObjectInfo{}, ferr
	}
	info, err := put(ctx, key, r, size, opts)
	if ferr != nil {
		return store.ObjectInfo{}, ferr
	}
	return info, err
}

// Get implements store.ObjectStore.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, store.ObjectInfo, error) {
	after, ferr := s.call(Get, key)
	if ferr != nil && !after {
		return nil, store.ObjectInfo{}, ferr
	}
	rc, info, err := s.inner.Get(ctx, key)
	if err != nil || ferr == nil {
		return rc, info, err
	}
	return failingBody{rc, ferr}, info, nil
}

// GetRange implements store.ObjectStore.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	after, ferr := s.call(GetRange, key)
	if ferr != nil && !after {
		return nil, ferr
	}
	rc, err := s.inner.GetRange(ctx, key, offset, length)
	if err != nil || ferr == nil {
		return rc, err
	}
	return failingBody{rc, ferr}, nil
}

// failingBody is an opened object whose body fails on the first read.
type failingBody struct {
	io.Closer
	err error
}

func (b failingBody) Read([]byte) (int, error) { return 0, b.err }

// Stat implements store.ObjectStore.
func (s *Store) Stat(ctx context.Context, key string) (store.ObjectInfo, error) {
	if _, ferr := s.call(Stat, key); ferr != nil {
		return store.ObjectInfo{}, ferr
	}
	return s.inner.Stat(ctx, key)
}

// List implements store.ObjectStore. The call is made, and its fault
// chosen, when the sequence is ranged over.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[store.ObjectInfo, error] {
	return func(yield func(store.ObjectInfo, error) bool) {
		after, ferr := s.call(List, prefix)
		if ferr != nil && !after {
			yield(store.ObjectInfo{}, ferr)
			return
		}
		for info, err := range s.inner.List(ctx, prefix) {
			if !yield(info, err) || err != nil {
				return
			}
		}
		if ferr != nil {
			yield(store.ObjectInfo{}, ferr)
		}
	}
}

// Delete implements store.ObjectStore.
func (s *Store) Delete(ctx context.Context, key string) error {
	after, ferr := s.call(Delete, key)
	if ferr != nil && !after {
		return ferr
	}
	err := s.inner.Delete(ctx, key)
	if ferr != nil {
		return ferr
	}
	return err
}
