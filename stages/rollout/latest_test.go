package rollout

import (
	"bytes"
	"context"
	"path"
	"slices"
	"sync"
	"testing"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

// served answers for one policy version from a script the versions
// share, noting which version answered each turn; hook runs after a
// version's answer.
type served struct {
	v      int64
	script *agent.Scripted
	mu     *sync.Mutex
	log    *[]int64
	hook   func(v int64, turn int)
}

func (s served) Generate(ctx context.Context, req inference.GenerateRequest) (*inference.GenerateResponse, error) {
	resp, err := s.script.Generate(ctx, req)
	s.mu.Lock()
	*s.log = append(*s.log, s.v)
	turn := len(*s.log) - 1
	s.mu.Unlock()
	s.hook(s.v, turn)
	return resp, err
}

// Under episode_version latest an attempt that outlives an update goes on
// with the newer policy from the next turn, in a chunk of its own, and its
// rows say which version sampled each turn; a redelivery of the attempt
// plays the schedule the first delivery stored, though a newer version
// is stored by then.
func TestEpisodeMovesToTheLatestVersion(t *testing.T) {
	ctx := context.Background()
	bw := testinfra.Bubblewrap(t)
	st := testinfra.FreshStore(t)
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	tk, err := harbor.NewBuilder("greet").Instruction("Write hi to /app/hi.txt.\n").
		Solution("#!/bin/bash\necho h > /app/hi.txt\necho i >> /app/hi.txt\necho ! >> /app/hi.txt\n").
		TestScript("#!/bin/bash\ntrue\n").Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := trial.PutBundle(ctx, st, storeRun, "greet", tk); err != nil {
		t.Fatal(err)
	}
	ec := agent.Config{MaxTurns: 6}
	chat, err := ec.Chat(tok)
	if err != nil {
		t.Fatal(err)
	}
	format, err := ec.Format()
	if err != nil {
		t.Fatal(err)
	}
	store1 := func(v int64) {
		w := []byte("weights")
		if _, err := st.Put(ctx, path.Join(keys.Policy(storeRun, v), moe.WeightsFile), bytes.NewReader(w), int64(len(w)), store.PutOptions{}); err != nil {
			t.Error(err)
		}
	}
	// play runs one delivery of the attempt; the update to version 1 is
	// stored while version 0 answers turn 1.
	play := func(run string, lineage []string) ([]int64, schemas.RolloutCompletedPayload) {
		script, err := agent.FromSolution(chat, format, string(tk.Files[harbor.SolutionPath].Data))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var log []int64
		hook := func(v int64, turn int) {
			if v == 0 && turn == 1 {
				store1(1)
			}
		}
		s := NewStage(StageConfig{
			Store: st, Trial: trial.Options{Backend: bw}, Episode: ec, EpisodeVersion: agent.EpisodeLatest,
			Lineage: func(context.Context, string) ([]string, error) { return lineage, nil },
			Policies: func(_ context.Context, _ string, v int64) (Policy, error) {
				return Policy{Engine: served{v: v, script: script, mu: &mu, log: &log, hook: hook}, Tokenizer: tok}, nil
			},
			TempDir: t.TempDir(),
		})
		req := schemas.RolloutRequestedPayload{TaskID: "greet", Purpose: schemas.PurposeTrain, Iteration: 1, Seed: 3, MaxTurns: 6}
		rec := &testinfra.Recorder{Run: run}
		if err := s.Handle(ctx, testinfra.RootEvent(t, run, schemas.RolloutRequested, "greet", req), rec); err != nil {
			t.Fatal(err)
		}
		return log, completed(t, rec.Events)
	}
	log, done := play(storeRun, []string{storeRun})
	want := []int64{0, 0, 1, 1}
	if !slices.Equal(log, want) || done.PolicyVersion != 0 || done.LastVersion != 1 || done.Turns != 4 {
		t.Fatalf("turns answered by versions %v, completed %+v; want %v", log, done, want)
	}
	turns, err := schemas.ReadRows[schemas.TurnRow](ctx, st, done.TurnRows.Key, &done.TurnRows)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range turns {
		if r.PolicyVersion != want[i] {
			t.Fatalf("turn %d row says version %d, want %d", i, r.PolicyVersion, want[i])
		}
	}
	tokens, err := schemas.ReadRows[schemas.TokenRow](ctx, st, done.TokenRows.Key, &done.TokenRows)
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0].PolicyVersion != 0 || tokens[1].PolicyVersion != 1 || tokens[1].DriftRepair != agent.ChunkVersion ||
		turns[1].Chunk != 0 || turns[2].Chunk != 1 {
		t.Fatalf("%d chunks: %+v", len(tokens), tokens)
	}

	// A redelivery after the attempt's marker was lost, with version 2
	// stored by now: the stored schedule, not the newest version.
	if err := st.Delete(ctx, keys.AttemptMarker(storeRun, schemas.RolloutRequestedPayload{TaskID: "greet", Purpose: schemas.PurposeTrain, Iteration: 1}.AttemptID())); err != nil {
		t.Fatal(err)
	}
	store1(2)
	log, again := play(storeRun, []string{storeRun})
	if !slices.Equal(log, want) || again.LastVersion != 1 {
		t.Fatalf("the redelivery's turns were answered by versions %v (last %d), the first delivery's by %v", log, again.LastVersion, want)
	}
	// Replayed into a branch, which has stored no policy of its own, the
	// attempt plays the schedule of the run it branched from.
	if _, _, _, err := trial.PutBundle(ctx, st, "br", "greet", tk); err != nil {
		t.Fatal(err)
	}
	log, replayed := play("br", []string{"br", storeRun})
	if !slices.Equal(log, want) || replayed.LastVersion != 1 {
		t.Fatalf("the branch's turns were answered by versions %v (last %d), the parent's by %v", log, replayed.LastVersion, want)
	}
}
