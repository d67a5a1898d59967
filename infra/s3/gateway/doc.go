// Package gateway is t1's embedded object store: Start runs the versitygw
// S3 gateway in process over its POSIX backend. Objects are plain files at
// <Dir>/<bucket>/<key>, so DuckDB, pyarrow or polars can read stored
// Parquet in place; metadata lives in extended attributes (or, where the
// file system lacks them, a sidecar directory .<base of Dir>-meta next to
// Dir). The default bucket is DefaultBucket, "t1-data" (S3 bucket names
// need at least three characters). Credentials are generated once and
// kept, mode 0600, in <Dir>-credentials.json (see
// embedded.CredentialsPath); Gateway.Config returns an s3.Config for
// s3.Open that uses them.
//
// The gateway's backend makes Dir the process's working directory for as
// long as it runs and resolves object paths relative to it: relative paths
// elsewhere in the program then point into the store, and a Chdir anywhere
// breaks it. Close restores the previous working directory. Only one
// embedded gateway may run per process at a time; it can be closed and
// started again.
//
// So t1 runs it in a process of its own: package embedded starts t1's
// executable again, whose main calls ServeChild first, and that process
// serves the gateway until its parent lets go. Only that binary links this
// package's some three hundred packages; everything else that stores
// objects links the S3 client (package s3) and package embedded alone.
package gateway
