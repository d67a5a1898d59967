// Package s3 is the adapter of t1's object storage: Store implements
// store.ObjectStore (see package store for the contract) by speaking the S3
// protocol through minio-go to any S3-compatible endpoint (AWS, MinIO,
// Ceph, SeaweedFS, …) or to the embedded gateway on local disk (package
// gateway). It passes
// the conformance suite store/storetest; its tests run against the
// embedded gateway and live with it (package gateway).
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
package s3
