// Package store is t1's object storage: a small ObjectStore interface and
// its one implementation, S3, which speaks the S3 protocol through minio-go
// to any S3-compatible endpoint (AWS, MinIO, Ceph, SeaweedFS, …) or to an
// embedded gateway on local disk.
//
// # Contract
//
// Keys are non-empty strings, "/" used as a path separator by convention.
// Get, GetRange and Stat of a missing key return errors wrapping
// ErrNotFound; Delete of a missing key succeeds; PutIfAbsent of an existing
// key returns an error wrapping ErrExists, and of several concurrent
// PutIfAbsent calls for one key exactly one succeeds. Put accepts size -1
// for streams of unknown length and uploads them in 16 MiB parts. List is
// recursive and yields keys in ascending byte order. The storetest
// sub-package holds the conformance suite every endpoint must pass; the
// errorstore sub-package wraps a store to make chosen calls fail.
//
// PutIfAbsent relies on S3 conditional writes (If-None-Match: *), which the
// server checks atomically when the object is published, for single and
// multipart uploads alike. AWS S3 documents them and the embedded gateway
// honours them; an endpoint that ignores the header would silently
// overwrite, which the conformance suite detects. minio-go drops the header
// from CompleteMultipartUpload, so conditional uploads of more than 16 MiB
// or of unknown size drive their parts through the low-level client.
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
//
// # External mode
//
// Open(ctx, Config) connects to an endpoint ("host:port" plus Secure, or a
// URL), checks it answers, and creates the bucket if needed. An empty
// access/secret key pair is taken from AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN; an empty region from
// AWS_REGION or AWS_DEFAULT_REGION. Config.Prefix confines the store to a
// key prefix inside a shared bucket. Config's String and LogValue omit the
// secret key, and errors never contain it.
//
// # Embedded mode
//
// StartEmbedded runs the versitygw S3 gateway in process over its POSIX
// backend. Objects are plain files at <Dir>/<bucket>/<key>, so DuckDB,
// pyarrow or polars can read stored Parquet in place; metadata lives in
// extended attributes (or, where the file system lacks them, a sidecar
// directory .<base of Dir>-meta next to Dir). The default bucket is
// DefaultBucket, "t1-data" (S3 bucket names need at least three
// characters). Credentials are generated once and kept, mode 0600, in
// <Dir>-credentials.json (see CredentialsPath); Embedded.Config returns a
// Config for Open that uses them.
//
// The gateway's backend makes Dir the process's working directory for as
// long as it runs and resolves object paths relative to it: relative paths
// elsewhere in the program then point into the store, and a Chdir anywhere
// breaks it. Close restores the previous working directory. Only one
// embedded gateway may run per process at a time; it can be closed and
// started again.
package store
