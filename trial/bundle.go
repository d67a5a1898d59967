package trial

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// PutBundle stores t's deterministic bundle under keys.Bundle, once: equal
// tasks give equal bytes, so a repeated put (a redelivered event) finds
// the object present and succeeds. It returns the SHA-256 and size of the
// bundle stored, which are the stored object's, not t's, if a different
// task was stored under the id first: the bytes under a key, once
// announced, never change.
func PutBundle(ctx context.Context, st store.ObjectStore, run, taskID string, t *harbor.Task) (key, sum string, size int64, err error) {
	data, sum, err := t.BundleBytes()
	if err != nil {
		return "", "", 0, err
	}
	key = keys.Bundle(run, taskID)
	stored, _, err := store.PutOnceSum(ctx, st, key, bytes.NewReader(data), store.Sum{Size: int64(len(data)), SHA256: sum},
		store.PutOptions{ContentType: "application/gzip"})
	if err != nil {
		return "", "", 0, fmt.Errorf("store bundle: %w", err)
	}
	return key, stored.SHA256, stored.Size, nil
}

// FetchBundle reads the bundle at key, checks it against sum (when given)
// and extracts it into dir, which must not exist or be empty. A bundle that
// fails its checks is a permanent problem of the input, reported as such
// by the error's text; the store being away is not.
func FetchBundle(ctx context.Context, st store.ObjectStore, key, sum, dir string) (*harbor.Task, error) {
	rc, _, err := st.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", key, err)
	}
	data, err := io.ReadAll(io.LimitReader(rc, 2*harbor.DefaultLimits.MaxTotalBytes))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", key, err)
	}
	if sum != "" {
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != sum {
			return nil, &BadBundle{Key: key, Err: fmt.Errorf("sha256 %x, the event says %s", got, sum)}
		}
	}
	if err := harbor.Extract(bytes.NewReader(data), dir, harbor.DefaultLimits); err != nil {
		return nil, &BadBundle{Key: key, Err: err}
	}
	t, err := harbor.Load(dir)
	if err != nil {
		return nil, &BadBundle{Key: key, Err: err}
	}
	return t, nil
}

// BadBundle is a bundle that can never be used: corrupt, unsafe or not a
// valid task.
type BadBundle struct {
	Key string
	Err error
}

func (e *BadBundle) Error() string { return "bundle " + e.Key + ": " + e.Err.Error() }
func (e *BadBundle) Unwrap() error { return e.Err }

// Fetch extracts a run's task into dir: the bundle ref when set, else the
// run's own bundle of taskID. It returns the ref used. Unusable reports
// whether an error is the input's fault (a bad or missing bundle) rather
// than the store's.
func Fetch(ctx context.Context, st store.ObjectStore, run, taskID string, ref schemas.ObjectRef, dir string) (*harbor.Task, schemas.ObjectRef, error) {
	if ref.Key == "" {
		ref.Key = keys.Bundle(run, taskID)
	}
	t, err := FetchBundle(ctx, st, ref.Key, ref.SHA256, dir)
	return t, ref, err
}

// Unusable reports whether err from Fetch or FetchBundle means the bundle
// can never be used: corrupt, unsafe, invalid or absent.
func Unusable(err error) bool {
	var bad *BadBundle
	return errors.As(err, &bad) || errors.Is(err, store.ErrNotFound)
}
