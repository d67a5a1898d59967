package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLeaseIsExclusiveAndExpires(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	ctx := context.Background()
	a, err := l.AcquireLease(ctx, "reward", "job-a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireLease(ctx, "reward", "job-b", time.Second); !errors.Is(err, ErrLeased) {
		t.Fatalf("second holder: %v", err)
	}
	if _, err := l.AcquireLease(ctx, "audit", "job-b", time.Second); err != nil {
		t.Fatalf("another name: %v", err)
	}
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := l.AcquireLease(ctx, "reward", "job-b", time.Second)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	// A holder that dies frees the name after the TTL.
	_ = b
	checkFor(t, 10*time.Second, 200*time.Millisecond, func() error {
		c, err := l.AcquireLease(ctx, "reward", "job-c", time.Second)
		if err != nil {
			return err
		}
		return c.Release(ctx)
	})
}

// A lease outlives an outage of the bus shorter than its TTL: the renewal
// that fails while the server is down is tried again, and the holder
// keeps the name.
func TestLeaseKeptThroughAnOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits through a 14 s outage: skipped with -short")
	}
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Renewals every 8 s; the one at 8 s waits out its 5 s timeout while
	// the server is down, the one at 16 s finds it back.
	ls, err := l.AcquireLease(ctx, "control", "job-a", 24*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kept := make(chan error, 1)
	go func() { kept <- ls.Keep(ctx) }()
	ts.restartAfter(14 * time.Second)
	select {
	case err := <-kept:
		t.Fatalf("lease given up across the outage: %v", err)
	case <-time.After(4 * time.Second):
	}
	if _, err := l.AcquireLease(ctx, "control", "job-b", 24*time.Second); !errors.Is(err, ErrLeased) {
		t.Fatalf("another holder after the outage: %v", err)
	}
}

// A holder its successor knows to be gone is taken over at once; one it
// does not is left alone, and the old holder cannot renew what it lost.
func TestStaleLeaseIsTakenOver(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	ctx := context.Background()
	dead, err := l.AcquireLease(ctx, "control", "job-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireLeaseFrom(ctx, "control", "job-b", time.Minute, func(string) bool { return false }); !errors.Is(err, ErrLeased) {
		t.Fatalf("a live holder was taken over: %v", err)
	}
	var judged string
	b, err := l.AcquireLeaseFrom(ctx, "control", "job-b", time.Minute, func(h string) bool { judged = h; return true })
	if err != nil || judged != "job-a" {
		t.Fatalf("takeover of a dead holder: %v (judged %q)", err, judged)
	}
	if err := dead.Renew(ctx); err == nil {
		t.Fatal("the old holder renewed a lease taken over")
	}
	if err := b.Renew(ctx); err != nil {
		t.Fatal(err)
	}
}

// A lease excludes the names above and below its own, not its siblings:
// control over every run and control of one run never run at once, while
// control of two runs does.
func TestLeaseExcludesWholeAndPart(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	ctx := context.Background()
	whole, err := l.AcquireLease(ctx, "stage-control", "job-all", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireLease(ctx, "stage-control.a", "job-a", time.Minute); !errors.Is(err, ErrLeased) || !strings.Contains(err.Error(), "job-all") {
		t.Fatalf("a part of a held whole: %v, want ErrLeased naming job-all", err)
	}
	if err := whole.Release(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := l.AcquireLease(ctx, "stage-control.a", "job-a", time.Minute)
	if err != nil {
		t.Fatalf("a part after the whole was released (the refused claim must leave nothing behind): %v", err)
	}
	if _, err := l.AcquireLease(ctx, "stage-control.b", "job-b", time.Minute); err != nil {
		t.Fatalf("a sibling part: %v", err)
	}
	if _, err := l.AcquireLease(ctx, "stage-control", "job-all", time.Minute); !errors.Is(err, ErrLeased) {
		t.Fatalf("the whole while parts are held: %v", err)
	}
	if _, err := l.AcquireLease(ctx, "stage-eval", "job-all", time.Minute); err != nil {
		t.Fatalf("another whole: %v", err)
	}
	// A part held by a holder known to be gone does not keep the whole out.
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireLeaseFrom(ctx, "stage-control", "job-all", time.Minute, func(h string) bool { return h == "job-b" }); err != nil {
		t.Fatalf("the whole beside a stale part: %v", err)
	}
	if _, err := l.AcquireLease(ctx, "stage-control.b", "job-b2", time.Minute); !errors.Is(err, ErrLeased) {
		t.Fatalf("a part under the whole taken over: %v", err)
	}
	if _, err := l.AcquireLease(ctx, "stage control", "job", time.Minute); err == nil || errors.Is(err, ErrLeased) {
		t.Fatalf("a name with a space: %v, want it refused as a bad name", err)
	}
}

// Each lease lasts its own holder's TTL: a caller with a short one does
// not shorten a longer lease held meanwhile, and its own expires on time
// although the bucket keeps entries longer.
func TestLeaseTTLIsEachHolders(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	ctx := context.Background()
	if _, err := l.AcquireLease(ctx, "stage-control", "job-long", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireLease(ctx, "stage-eval", "job-short", time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, err := l.AcquireLease(ctx, "stage-control", "job-c", time.Minute); !errors.Is(err, ErrLeased) || !strings.Contains(err.Error(), "job-long") {
		t.Fatalf("a 1 min lease 2.5 s after another caller's 1 s one: %v, want it still held by job-long", err)
	}
	if _, err := l.AcquireLease(ctx, "stage-eval", "job-d", time.Minute); err != nil {
		t.Fatalf("a 1 s lease not renewed for 2.5 s: %v, want it free", err)
	}
	for _, ttl := range []time.Duration{time.Millisecond, MaxLeaseTTL + time.Second} {
		if _, err := l.AcquireLease(ctx, "stage-ppo", "job-e", ttl); err == nil || errors.Is(err, ErrLeased) {
			t.Fatalf("TTL %s: %v, want it refused as out of range", ttl, err)
		}
	}
}
