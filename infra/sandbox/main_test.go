package sandbox

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/t1pipe/t1/infra/hostres"
)

// TestMain fails the package when its tests leave a sandbox's mount,
// cgroup or directory on the host.
func TestMain(m *testing.M) {
	code := m.Run()
	if own, _ := hostres.Leaks(); len(own) > 0 {
		fmt.Fprintf(os.Stderr, "left on the host (now removed):\n  %s\n", strings.Join(own, "\n  "))
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
