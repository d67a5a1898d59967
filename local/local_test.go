package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/config"
)

// A long-lived process that starts while a short-lived command owns the
// data directory must take it over, not attach to servers about to stop.
func TestServeWaitsForTransientOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := config.Default()
	cfg.Data = t.TempDir()

	first, err := Open(ctx, cfg, Options{NoStore: true})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Owner {
		t.Fatal("first opener should own the data directory")
	}
	_, ep, err := attach(first.DataDir)
	if err != nil || ep == nil || !ep.Transient {
		t.Fatalf("endpoints of a short-lived owner: %+v, %v", ep, err)
	}

	// Another short-lived command attaches.
	peer, err := Open(ctx, cfg, Options{NoStore: true})
	if err != nil {
		t.Fatal(err)
	}
	if peer.Owner {
		t.Fatal("second short-lived opener should attach, not own")
	}
	peer.Close()

	type result struct {
		in  *Infra
		err error
	}
	done := make(chan result, 1)
	go func() {
		in, err := Open(ctx, cfg, Options{NoStore: true, Serve: true})
		done <- result{in, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("serving opener returned while a transient owner held the directory: %+v %v", r.in, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	first.Close()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.in.Close()
	if !r.in.Owner {
		t.Fatal("serving opener should own the directory once the transient owner exits")
	}
	_, ep, err = attach(r.in.DataDir)
	if err != nil || ep == nil || ep.Transient {
		t.Fatalf("endpoints of a serving owner: %+v, %v", ep, err)
	}
}

// Whoever finds the data directory held can say by whom.
func TestLockNamesItsHolder(t *testing.T) {
	dir := t.TempDir()
	f, err := lock(dir)
	if err != nil || f == nil {
		t.Fatalf("lock: %v, %v", f, err)
	}
	defer f.Close()
	if again, err := lock(dir); err != nil || again != nil {
		t.Fatalf("second lock: %v, %v", again, err)
	}
	got, pid := holder(dir), strconv.Itoa(os.Getpid())
	if !strings.HasPrefix(got, "a lock last taken by process "+pid+" (") || !strings.Contains(got, filepath.Base(os.Args[0])) {
		t.Fatalf("holder = %q, want process %s and its command line", got, pid)
	}
}

// An owner that is closing has removed its endpoints and lets go of the
// lock only once its servers have stopped: whoever arrives meanwhile
// takes the lock when it comes free, rather than waiting for endpoints
// that will not come.
func TestAttachTakesALockLetGo(t *testing.T) {
	dir := t.TempDir()
	closing, err := lock(dir)
	if err != nil || closing == nil {
		t.Fatalf("lock: %v, %v", closing, err)
	}
	time.AfterFunc(300*time.Millisecond, func() { closing.Close() })
	start := time.Now()
	owner, peer, err := attach(dir)
	if err != nil || owner == nil || peer != nil {
		t.Fatalf("attach = %v, %+v, %v; want the lock", owner, peer, err)
	}
	owner.Close()
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %s", d)
	}
}
