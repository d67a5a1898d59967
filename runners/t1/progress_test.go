package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/schemas"
)

// Each line names the phase the run is in, a continued branch's too,
// whose own events hold no synthesis and whose line counts no tasks.
func TestProgressNamesThePhase(t *testing.T) {
	sc := config.Default().Stages
	for _, c := range []struct {
		counts map[string]uint64
		want   string
	}{
		{map[string]uint64{}, "synth ·"},
		{map[string]uint64{schemas.TaskSynthesized: 3, schemas.TaskAudited: 1}, "synth + audit ·"},
		{map[string]uint64{schemas.TaskSynthesized: 3, schemas.PoolSealed: 1}, "rollout (iteration 1/3) ·"},
		{map[string]uint64{schemas.RolloutRequested: 64, schemas.SFTCompleted: 1}, "rollout (iteration 1/3) ·"},
		{map[string]uint64{schemas.RolloutRequested: 64, schemas.BatchReady: 1}, "train (iteration 1/3) ·"},
	} {
		var b bytes.Buffer
		newPipelineProgress(&b, sc).update(c.counts, time.Second)
		if !strings.Contains(b.String(), "] "+c.want) {
			t.Errorf("%v: %q, want %q", c.counts, b.String(), c.want)
		}
		// A continued branch synthesises nothing: its pool is its parent's.
		branch := c.counts[schemas.TaskSynthesized] == 0 && c.counts[schemas.RolloutRequested] > 0
		if got := strings.Contains(b.String(), " · tasks "); got == branch {
			t.Errorf("%v: %q: tasks counted %v, want %v", c.counts, b.String(), got, !branch)
		}
	}
}
