// Package reports reads the training reports a run stored, for the tests
// of runs that train; testinfra itself stays free of the trainer, which
// imports the packages testinfra serves.
package reports

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/trainer"
)

// Actor reads the actor updates' reports of run from the embedded
// store under the data directory data, failing t unless there are want.
func Actor(t testing.TB, data, run string, want int) map[string]trainer.ActorMetrics {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(data, "s3", "*", "runs", run, "training", "iter=*", "policy-v*.json"))
	if len(paths) != want {
		t.Fatalf("%d actor reports of run %s, want %d: %v", len(paths), run, want, paths)
	}
	out := map[string]trainer.ActorMetrics{}
	for _, p := range paths {
		var rep struct {
			Metrics trainer.ActorMetrics `json:"metrics"`
		}
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = rep.Metrics
	}
	return out
}
