package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLeaseIsExclusiveAndExpires(t *testing.T) {
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
