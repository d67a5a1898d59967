package main

import (
	"os"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// TestMain fails the package when its tests leave a sandbox's mount,
// cgroup or directory on the host, and removes what they left.
func TestMain(m *testing.M) { os.Exit(testinfra.Run(m)) }
