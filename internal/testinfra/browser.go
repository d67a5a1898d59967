package testinfra

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Playwright finds node, Debian's chromium and the playwright-core that
// make setup installs under modules (a node_modules directory), skipping
// the test without them unless T1_REQUIRE_CHROMIUM (set by .ci/run)
// demands them.
func Playwright(t testing.TB, modules string) (node, chromium string) {
	t.Helper()
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node")
	}
	if chromium, err = exec.LookPath("chromium"); err != nil {
		missing = append(missing, "chromium")
	}
	if _, err := os.Stat(filepath.Join(modules, "playwright-core", "package.json")); err != nil {
		missing = append(missing, modules)
	}
	if len(missing) > 0 {
		msg := "a browser test needs " + strings.Join(missing, ", ") + " (make setup installs them)"
		if os.Getenv("T1_REQUIRE_CHROMIUM") != "" {
			t.Fatal("T1_REQUIRE_CHROMIUM is set but " + msg)
		}
		t.Skip(msg)
	}
	return node, chromium
}
