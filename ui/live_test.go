package ui

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
)

// In a real browser, the page of a run in progress shows the run's end
// when its event arrives, without a reload by hand, and then stops
// listening.
func TestLiveReloadInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	node, chromium := testinfra.Playwright(t, filepath.Join(testinfra.WorkDir(), "testdata", "node_modules"))
	f := newFixture(t, "u")
	f.srv.Poll = 100 * time.Millisecond
	srv := httptest.NewServer(f.srv.Handler())
	defer srv.Close()
	cmd := exec.Command(node, filepath.Join(testinfra.WorkDir(), "testdata/live.mjs"), srv.URL+"/", "u", chromium)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewReader(stdout)
	if l, err := lines.ReadString('\n'); err != nil || strings.TrimSpace(l) != "ready" {
		cmd.Wait()
		t.Fatalf("browser: %q %v\n%s", l, err, stderr.String())
	}
	f.publish(t, schemas.RunCompleted, "done", schemas.RunCompletedPayload{Iterations: 2, PolicyVersion: 3})
	io.WriteString(stdin, "go\n")
	stdin.Close()
	out, err := io.ReadAll(lines)
	if werr := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("browser: %v %v\n%s\n%s", err, werr, out, stderr.String())
	}
	var seen struct {
		Before, After, Summary string
		Errors                 []string
		SameURL, Listening     bool
	}
	if err := json.Unmarshal(out, &seen); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if seen.Before != "running" || seen.After != "completed" || !strings.HasPrefix(seen.Summary, "completed") ||
		!seen.SameURL || seen.Listening || len(seen.Errors) > 0 {
		t.Fatalf("%+v", seen)
	}
}
