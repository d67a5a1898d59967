// Package store is the port of t1's object storage: the small ObjectStore
// interface every user of stored bytes holds, its errors, and the
// store-once helpers. It has no implementation of its own; the adapter is
// infra/s3 (any S3-compatible endpoint, or an embedded gateway on local
// disk), and the key of every object t1 stores is built in keys.
//
// # Contract
//
// Keys are non-empty strings, "/" used as a path separator by convention.
// Get, GetRange and Stat of a missing key return errors wrapping
// ErrNotFound; Delete of a missing key succeeds; PutIfAbsent of an existing
// key returns an error wrapping ErrExists, and of several concurrent
// PutIfAbsent calls for one key exactly one succeeds. Put accepts size -1
// for streams of unknown length. List is recursive and yields keys in
// ascending byte order. The storetest sub-package holds the conformance
// suite every implementation and endpoint must pass; the errorstore
// sub-package wraps a store to make chosen calls fail.
//
// # Store once
//
// A handler may run more than once for one input (a redelivery, or two
// deliveries at once) and, when its result is not a function of its input
// alone (a model's reply, a trainer's report, an episode), two runs can
// compute different results for one key. Whichever is stored first is the
// result: an event that names a key, or the hash of the bytes under it,
// must stay true once published, so such a key is never overwritten.
// PutOnce and PutOnceSum store with PutIfAbsent and, when another writer
// stored first, return that writer's object (its bytes, or its size and
// SHA-256) for the caller to announce instead of its own.
package store
