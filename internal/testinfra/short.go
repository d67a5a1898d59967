package testinfra

import (
	"flag"
	"testing"
)

// Short reports whether the tests run with -short. Unlike testing.Short it
// may be called from TestMain before m.Run, which is where a test binary
// decides whether to build what only its long scenarios need.
func Short() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return testing.Short()
}

// Long marks t as a long scenario (a whole pipeline, a fault or a hostile
// corpus driven through real servers and sandboxes): go test -short skips
// it, so the fast loop stays fast; make test runs it.
func Long(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("long scenario: skipped with -short (make test runs it)")
	}
}
