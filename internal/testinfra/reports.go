package testinfra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// ActorReport is what the engine tests read of an actor update's report
// (trainer.ActorMetrics, whose package this one cannot import: trainer's
// own dependencies test with testinfra).
type ActorReport struct {
	Actions           int64   `json:"actions"`
	LogProbGapMax     float64 `json:"logprob_gap_max"`
	RoutingSets       int64   `json:"routing_sets"`
	RoutingMismatches int64   `json:"routing_mismatches"`
	Replay            bool    `json:"replay"`
	LossDrift         int64   `json:"loss_drift"`
}

// ActorReports reads the actor updates' reports of run from the embedded
// store under the data directory data, failing t unless there are want.
func ActorReports(t testing.TB, data, run string, want int) map[string]ActorReport {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(data, "s3", "*", "runs", run, "training", "iter=*", "policy-v*.json"))
	if len(paths) != want {
		t.Fatalf("%d actor reports of run %s, want %d: %v", len(paths), run, want, paths)
	}
	out := map[string]ActorReport{}
	for _, p := range paths {
		var rep struct {
			Metrics ActorReport `json:"metrics"`
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
