// Package tests holds end-to-end tests that drive the t1 binary as a user
// or a batch scheduler would: built from source, run as a process against
// its embedded NATS and S3, interrupted, inspected and resumed.
package tests
