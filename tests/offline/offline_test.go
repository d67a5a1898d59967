// Package offline_test runs hand-written Harbor-format tasks whose
// verifiers fetch pytest from the network, through the offline mode: their
// test.sh runs whole on stand-ins for the installers, one result per test.
package offline_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/trial"
)

func TestFixturesOffline(t *testing.T) {
	bw := testinfra.Bubblewrap(t)
	for name, want := range map[string]struct {
		tests  int
		source verifier.Source
	}{"csv-summary": {4, verifier.SourceCTRF}, "fix-config": {4, verifier.SourceJUnit}} {
		tests := want.tests
		t.Run(name, func(t *testing.T) {
			// Each fixture waits on its sandboxes and pytest more than it computes.
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dir, err := filepath.Abs(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			tk, err := harbor.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if need, uses := verifier.NeedsOffline(tk); !need || len(uses) == 0 {
				t.Fatal("the fixture's test.sh should be recognised as fetching from the network")
			}
			opt := trial.Options{Backend: bw}
			solved, err := trial.Run(ctx, dir, tk, trial.Oracle(dir), opt)
			if err != nil {
				t.Fatal(err)
			}
			if !solved.Offline || !solved.Report.Solved || solved.Report.Total != tests || solved.Report.Source != want.source {
				t.Fatalf("oracle: %+v", solved.Report)
			}
			unsolved, err := trial.Run(ctx, dir, tk, nil, opt)
			if err != nil {
				t.Fatal(err)
			}
			if unsolved.Report.Solved || unsolved.Report.Total != tests || unsolved.Report.Passed == tests {
				t.Fatalf("untouched environment: %+v", unsolved.Report)
			}
			for _, a := range unsolved.Report.Assertions {
				if !strings.Contains(a.Name, "test_") {
					t.Fatalf("assertion named %q", a.Name)
				}
			}
		})
	}
}
