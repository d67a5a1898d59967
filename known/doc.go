// Package known answers a command line that names something that does
// not exist — a run, table, column, event type, stage or policy version —
// with one line that names what does, the closest first, marked as a
// usage error (exit 2). A mistyped name then costs one more try, not a
// search through t1 runs or the docs, and never passes for an empty
// result: a filter on a run that is not there would print nothing and
// exit 0.
//
// Closeness is the edit distance between the names, ignoring case, so
// MAIN finds main and qurey finds query.
package known
