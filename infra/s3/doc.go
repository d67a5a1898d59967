// Package s3 is the adapter of t1's object storage: Store implements
// store.ObjectStore (see package store for the contract) by speaking the S3
// protocol through minio-go to any S3-compatible endpoint (AWS, MinIO,
// Ceph, SeaweedFS, …) or to an embedded gateway on local disk. It passes
// the conformance suite store/storetest.
//
// # Uploads
//
// Put uploads streams of unknown length in 16 MiB parts. PutIfAbsent relies on S3 conditional writes (If-None-Match: *), which the
// server checks atomically when the object is published, for single and
// multipart uploads alike. AWS S3 documents them and the embedded gateway
// honours them; an endpoint that ignores the header would silently
// overwrite, which the conformance suite detects. minio-go drops the header
// from CompleteMultipartUpload, so conditional uploads of more than 16 MiB
// or of unknown size drive their parts through the low-level client.
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
package s3
