package image

import "testing"

// TestBase is testBase for the package's external tests.
var TestBase = testBase

// MachineCache is the cache that holds the Debian base on this machine
// (testBase): tests whose layers are many and slow to make keep them
// there, so a second run of the test binary finds them. Layers are
// content-addressed and the cache locked per build, so runs share it
// safely.
func MachineCache(t testing.TB) (string, Base) {
	_, b := testBase(t)
	return baseDir, b
}
