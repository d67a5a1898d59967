package store

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
)

// MaxOnceBytes bounds the objects PutOnce stores and reads back; larger
// ones go through PutOnceSum.
const MaxOnceBytes = 16 << 20

// SHA256Metadata is the user metadata key under which PutOnceSum records,
// and from which it reads back, an object's SHA-256 (64 lower-case hex
// digits).
const SHA256Metadata = "sha256"

// Sum identifies stored bytes by their size and SHA-256 (lower-case hex).
type Sum struct {
	Size   int64
	SHA256 string
}

// PutOnce stores data at key unless key holds an object already, and
// returns the bytes stored at key: data itself when this call stored them
// (mine is true), else the object of the writer that stored first, read
// back in full (mine is false). The caller announces the returned bytes,
// never data when mine is false.
//
// data may hold at most MaxOnceBytes; a stored object larger than that is
// an error. Any error of the store, including one reading the other
// writer's object back, is returned wrapped and leaves nothing this call
// can have announced: the caller retries.
func PutOnce(ctx context.Context, st ObjectStore, key string, data []byte, opts PutOptions) (stored []byte, mine bool, err error) {
	if len(data) > MaxOnceBytes {
		return nil, false, fmt.Errorf("store once %s: %d bytes, over %d", key, len(data), MaxOnceBytes)
	}
	_, err = st.PutIfAbsent(ctx, key, bytes.NewReader(data), int64(len(data)), opts)
	if err == nil {
		return data, true, nil
	}
	if !errors.Is(err, ErrExists) {
		return nil, false, fmt.Errorf("store once %s: %w", key, err)
	}
	rc, _, err := st.Get(ctx, key)
	if err != nil {
		return nil, false, fmt.Errorf("store once %s: read the stored object: %w", key, err)
	}
	defer rc.Close()
	stored, err = io.ReadAll(io.LimitReader(rc, MaxOnceBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("store once %s: read the stored object: %w", key, err)
	}
	if len(stored) > MaxOnceBytes {
		return nil, false, fmt.Errorf("store once %s: the stored object is over %d bytes", key, MaxOnceBytes)
	}
	return stored, false, nil
}

// PutOnceSum is PutOnce for objects too large to read back: it stores the
// sum.Size bytes of r, whose SHA-256 the caller computed as sum.SHA256, at
// key unless key holds an object already, recording the hash as the
// object's SHA256Metadata. It returns the Sum of the object stored at key:
// sum when this call stored it (mine is true), else the size and recorded
// hash of the object that another writer stored first (mine is false),
// which the caller announces instead of sum. A stored object without a
// well-formed recorded hash is an error: it was not stored through
// PutOnceSum. Store errors are returned wrapped, as by PutOnce.
func PutOnceSum(ctx context.Context, st ObjectStore, key string, r io.Reader, sum Sum, opts PutOptions) (stored Sum, mine bool, err error) {
	opts.Metadata = maps.Clone(opts.Metadata)
	if opts.Metadata == nil {
		opts.Metadata = map[string]string{}
	}
	opts.Metadata[SHA256Metadata] = sum.SHA256
	_, err = st.PutIfAbsent(ctx, key, r, sum.Size, opts)
	if err == nil {
		return sum, true, nil
	}
	if !errors.Is(err, ErrExists) {
		return Sum{}, false, fmt.Errorf("store once %s: %w", key, err)
	}
	info, err := st.Stat(ctx, key)
	if err != nil {
		return Sum{}, false, fmt.Errorf("store once %s: stat the stored object: %w", key, err)
	}
	h := info.Metadata[SHA256Metadata]
	if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
		return Sum{}, false, fmt.Errorf("store once %s: the stored object carries no %s metadata", key, SHA256Metadata)
	}
	return Sum{Size: info.Size, SHA256: h}, false, nil
}
