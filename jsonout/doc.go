// Package jsonout writes JSON as every t1 command prints it: text as it
// is (no \u003c for <, so a command line or a chat template reads as
// written), and integers a JavaScript reader would round — beyond 2^53,
// such as 64-bit seeds — as strings of their digits, so that jq, a
// browser or a pandas reader gets the exact value. Errors under --json
// are one object of the same kind.
package jsonout
