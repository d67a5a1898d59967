package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LeaseBucket is the KV bucket that holds leases.
const LeaseBucket = "t1_leases"

// ErrLeased is returned by AcquireLease when another holder has the lease.
var ErrLeased = errors.New("engine: leased by another holder")

// MaxLeaseTTL bounds a lease's TTL. It is the bucket's own TTL, the same
// for every caller: each entry carries its holder's TTL and expires that
// long after its last write (the server's time of it), so holders with
// different TTLs never change each other's expiry, and the bucket drops
// what a crashed holder left once no TTL can still cover it.
const MaxLeaseTTL = 10 * time.Minute

// leaseValue is what a lease's entry holds.
type leaseValue struct {
	Holder string        `json:"holder"`
	TTL    time.Duration `json:"ttl_ns"`
}

func (ls *Lease) value() []byte {
	b, _ := json.Marshal(leaseValue{Holder: ls.holder, TTL: ls.ttl})
	return b
}

// readLease decodes an entry. One that is not a leaseValue (written by a
// t1 whose entries held the holder's name alone) lasts as long as any.
func readLease(e jetstream.KeyValueEntry) leaseValue {
	var v leaseValue
	if json.Unmarshal(e.Value(), &v) != nil || v.Holder == "" || v.TTL <= 0 {
		return leaseValue{Holder: string(e.Value()), TTL: MaxLeaseTTL}
	}
	return v
}

// free tells whether e no longer keeps anyone out: its TTL ran out since
// its last write, or stale judges its holder gone. The write time is the
// server's and now is this host's, so a clock ahead of the server's by d
// frees entries d early.
func free(e jetstream.KeyValueEntry, stale func(string) bool) bool {
	v := readLease(e)
	return time.Since(e.Created()) > v.TTL || stale != nil && stale(v.Holder)
}

// Lease is an exclusive, expiring claim on a name (a stage, say), held in
// JetStream KV: two batch jobs of one stage never run at once, and a job
// that dies without releasing frees the name after the TTL.
//
// Names are dot-separated paths, and a lease excludes every lease above
// and below its name: "stage-control" (control over every run) and
// "stage-control.main" (control of run main alone) are never held by two
// holders at once, while "stage-control.main" and "stage-control.nightly"
// are independent.
type Lease struct {
	kv     jetstream.KeyValue
	key    string
	holder string
	rev    uint64
	ttl    time.Duration
}

// AcquireLease claims name for holder for ttl (1 s to MaxLeaseTTL); holder
// must name this claimant alone (host, process, start time). It fails
// with ErrLeased (wrapped, naming the current holder) when someone else
// holds it, or a name above or below it.
func (l *Log) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (*Lease, error) {
	return l.AcquireLeaseFrom(ctx, name, holder, ttl, nil)
}

// AcquireLeaseFrom is AcquireLease that also takes the lease over when
// stale, given the current holder, says that holder is gone (a process
// killed on this host before its lease expired). The takeover replaces
// exactly the entry stale judged, so a live holder that renewed meanwhile
// keeps it. A stale holder of a name above or below name is removed the
// same way.
func (l *Log) AcquireLeaseFrom(ctx context.Context, name, holder string, ttl time.Duration, stale func(holder string) bool) (*Lease, error) {
	if !validLeaseName(name) {
		return nil, fmt.Errorf("engine: lease name %q: want dot-separated parts of letters, digits and -/_=", name)
	}
	if ttl < time.Second || ttl > MaxLeaseTTL {
		return nil, fmt.Errorf("engine: lease %s: TTL %s: want 1s to %s", name, ttl, MaxLeaseTTL)
	}
	kv, err := l.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: LeaseBucket, TTL: MaxLeaseTTL, Replicas: l.cfg.Replicas})
	if err != nil {
		return nil, fmt.Errorf("engine: lease bucket: %w", err)
	}
	ls, err := claim(ctx, kv, name, holder, ttl, stale)
	if err != nil {
		return nil, err
	}
	// A claimant writes its own name before it looks at the names it
	// excludes, so of two that race for a whole and one of its parts at
	// least one sees the other. Both may, and both step back: neither
	// runs, and a retry settles it.
	if err := ls.excluded(ctx, stale); err != nil {
		_ = ls.Release(context.WithoutCancel(ctx))
		return nil, err
	}
	return ls, nil
}

func validLeaseName(name string) bool {
	for part := range strings.SplitSeq(name, ".") {
		if part == "" || strings.ContainsFunc(part, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-/_=", r))
		}) {
			return false
		}
	}
	return true
}

// claim writes name's entry for holder, unless another holder has it. An
// entry that is free is replaced exactly as read, so a holder that
// renewed meanwhile keeps it.
func claim(ctx context.Context, kv jetstream.KeyValue, name, holder string, ttl time.Duration, stale func(string) bool) (*Lease, error) {
	ls := &Lease{kv: kv, key: name, holder: holder, ttl: ttl}
	rev, err := kv.Create(ctx, name, ls.value())
	if errors.Is(err, jetstream.ErrKeyExists) {
		cur, gerr := kv.Get(ctx, name)
		if gerr != nil {
			return nil, fmt.Errorf("%w: %s", ErrLeased, name)
		}
		if free(cur, stale) {
			if rev, err = kv.Update(ctx, name, ls.value(), cur.Revision()); err == nil {
				ls.rev = rev
				return ls, nil
			}
		}
		return nil, leasedBy(cur)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: lease %s: %w", name, err)
	}
	ls.rev = rev
	return ls, nil
}

func leasedBy(cur jetstream.KeyValueEntry) error {
	v := readLease(cur)
	return fmt.Errorf("%w: %s holds %s since %s, for %s after its last renewal", ErrLeased, v.Holder, cur.Key(),
		cur.Created().Format(time.RFC3339), v.TTL)
}

// excluded fails with ErrLeased if a live holder has a name above or
// below the lease's; stale holders of them are removed.
func (ls *Lease) excluded(ctx context.Context, stale func(string) bool) error {
	var names []string
	parts := strings.Split(ls.key, ".")
	for i := 1; i < len(parts); i++ {
		names = append(names, strings.Join(parts[:i], "."))
	}
	below, err := ls.kv.ListKeysFiltered(ctx, ls.key+".>")
	if err != nil {
		return fmt.Errorf("engine: lease %s: list the names below it: %w", ls.key, err)
	}
	for k := range below.Keys() {
		names = append(names, k)
	}
	for _, k := range names {
		cur, err := ls.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("engine: lease %s: read %s: %w", ls.key, k, err)
		}
		if free(cur, stale) && ls.kv.Delete(ctx, k, jetstream.LastRevision(cur.Revision())) == nil {
			continue
		}
		return leasedBy(cur)
	}
	return ctx.Err()
}

// Renew extends the lease by its TTL. It fails if the lease expired and
// someone else took it meanwhile.
func (ls *Lease) Renew(ctx context.Context) error {
	rev, err := ls.kv.Update(ctx, ls.key, ls.value(), ls.rev)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// A renewal whose answer was lost (it timed out while the bus was
		// down, and the client sent it once reconnected) was stored all
		// the same: the entry is then still this holder's, one revision on.
		if cur, gerr := ls.kv.Get(ctx, ls.key); gerr == nil && readLease(cur).Holder == ls.holder {
			rev, err = ls.kv.Update(ctx, ls.key, ls.value(), cur.Revision())
		}
	}
	if err != nil {
		return fmt.Errorf("engine: renew lease %s: %w", ls.key, err)
	}
	ls.rev = rev
	return nil
}

// Keep renews the lease every third of its TTL until ctx ends. A renewal
// that fails is tried again at the next tick while the lease cannot have
// expired yet: a bus failing over to another node answers nothing for a
// few seconds, and giving up then would stop a healthy job. Keep returns
// the error once the lease is lost: someone else took it, or no renewal
// succeeded for a whole TTL.
func (ls *Lease) Keep(ctx context.Context) error {
	t := time.NewTicker(ls.ttl / 3)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := ls.Renew(ctx)
		switch {
		case err == nil:
			renewed = time.Now()
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, jetstream.ErrKeyExists), time.Since(renewed) >= ls.ttl:
			return err
		}
	}
}

// Release gives the lease up, if it is still this holder's.
func (ls *Lease) Release(ctx context.Context) error {
	err := ls.kv.Delete(ctx, ls.key, jetstream.LastRevision(ls.rev))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("engine: release lease %s: %w", ls.key, err)
	}
	return nil
}
