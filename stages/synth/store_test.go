package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/chat"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/store/errorstore"
)

// llmStage is a synth stage using the llm generator against ep.
func llmStage(t *testing.T, st store.ObjectStore, ep http.Handler) *stage {
	t.Helper()
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	client := &chat.Client{URL: srv.URL, APIKey: apiKey, Backoff: time.Millisecond, Attempts: 1, Timeout: 10 * time.Second}
	return &stage{cfg: Config{Store: st, StepsPerRound: 2, TempDir: t.TempDir(), Generator: LLM,
		LLM: &LLMConfig{Client: client, LLMSettings: LLMSettings{Model: "scripted", MaxTokens: 4096, Seed: 7}}}}
}

// A round that grows from stored seeds reads their lineage: a store fault
// there is retried, and the retry fans out the same candidates.
func TestStoreFaultsFanOut(t *testing.T) {
	f := newFamily(t)
	want := testinfra.StoreFaults{
		Setup: func(t *testing.T, st store.ObjectStore) { f.store(t, st) },
		Stage: func(t *testing.T, st store.ObjectStore) engine.Stage { return New(Config{Store: st}) },
		Event: testinfra.RootEvent(t, llmRun, schemas.SynthRequested, "round-1", schemas.SynthRequestedPayload{Round: 1, SeedIDs: []string{f.parent.ID()}, PerSeed: 2, Seed: 1}),
	}.Run(t)
	if len(want) != 2 {
		t.Fatalf("fanned out %v", want)
	}
}

// An llm candidate reads its parent, then stores the model's reply before
// judging it (here: discarding prose). Every store call failing is
// retried, and the retry reaches the same verdict.
func TestStoreFaultsLLMCandidate(t *testing.T) {
	f := newFamily(t)
	ep := &endpoint{script: []func(http.ResponseWriter){says("Sure! Here is a longer task.")}}
	want := testinfra.StoreFaults{
		Setup: func(t *testing.T, st store.ObjectStore) { f.store(t, st) },
		Stage: func(t *testing.T, st store.ObjectStore) engine.Stage { return New(llmStage(t, st, ep).cfg) },
		Event: testinfra.RootEvent(t, llmRun, schemas.SynthCandidate, "c", schemas.SynthCandidatePayload{Round: 1, ParentID: f.parent.ID(), RootID: f.parent.ID(), Generator: LLM, Seed: 1}),
	}.Run(t)
	if len(want) != 1 || want[0].Type != schemas.SynthDiscarded {
		t.Fatalf("settled with %v", want)
	}
}

// Keeping a task that passed execution stores its lineage, bundle and
// tasks row: every one of those calls failing is retried, and the retry
// announces the same task. (Execution itself, seconds of sandboxes, is
// left out: it precedes every store write.)
func TestStoreFaultsKeep(t *testing.T) {
	f := newFamily(t)
	tk, err := f.child.Task(1)
	if err != nil {
		t.Fatal(err)
	}
	lin := Lineage{TaskID: f.child.ID(), ParentID: f.parent.ID(), RootID: f.parent.ID(), Round: 1, Generator: Builtin}
	ev := testinfra.RootEvent(t, llmRun, schemas.SynthCandidate, "c", schemas.SynthCandidatePayload{Round: 1})
	want := testinfra.StoreFaults{
		Stage: func(t *testing.T, st store.ObjectStore) engine.Stage {
			s := &stage{cfg: Config{Store: st, TempDir: t.TempDir()}}
			return engine.NewStage("synth-keep", nil, func(ctx context.Context, ev engine.Event, out engine.Emitter) error {
				return s.keep(ctx, ev, out, lin, tk, f.child.Category, f.child.Difficulty, f.child.Work)
			})
		},
		Event: ev,
	}.Run(t)
	if len(want) != 1 || want[0].Type != schemas.TaskSynthesized {
		t.Fatalf("kept with %v", want)
	}
}

// A delivery that finds a task's lineage stored by another one announces
// the stored lineage.
func TestLineageStoredByAnotherDelivery(t *testing.T) {
	f := newFamily(t)
	tk, err := f.child.Task(1)
	if err != nil {
		t.Fatal(err)
	}
	st := testinfra.FreshStore(t)
	theirs, _ := json.Marshal(Lineage{TaskID: f.child.ID(), ParentID: "their-parent", RootID: "their-root", Round: 1})
	if _, err := st.Put(context.Background(), keys.Lineage(llmRun, f.child.ID()), bytes.NewReader(theirs), int64(len(theirs)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	s := &stage{cfg: Config{Store: st, TempDir: t.TempDir()}}
	rec := &testinfra.Recorder{Run: llmRun}
	lin := Lineage{TaskID: f.child.ID(), ParentID: f.parent.ID(), RootID: f.parent.ID(), Round: 1}
	if err := s.keep(context.Background(), testinfra.RootEvent(t, llmRun, schemas.SynthCandidate, "c", nil), rec, lin, tk, "c", "d", 3); err != nil {
		t.Fatal(err)
	}
	var p schemas.TaskSynthesizedPayload
	if len(rec.Events) != 1 || rec.Events[0].Decode(&p) != nil || p.ParentID != "their-parent" {
		t.Fatalf("announced %v, want the stored lineage's parent", rec.Events)
	}
	rows, err := schemas.ReadRows[schemas.TaskRow](context.Background(), st, p.Task.Key, &p.Task)
	if err != nil || len(rows) != 1 || rows[0].RootID != "their-root" {
		t.Fatalf("tasks row %+v, %v", rows, err)
	}
}

// A delivery whose reply another delivery stored first, while it waited on
// the model, judges the stored reply, not its own.
func TestReplyStoredByAnotherDelivery(t *testing.T) {
	f := newFamily(t)
	st := testinfra.FreshStore(t)
	id := "llm-x"
	key := keys.SynthReply(llmRun, id)
	theirs, _ := json.Marshal(chat.Response{ID: "theirs", Choices: []chat.Choice{{Message: chat.Message{Role: "assistant", Content: "their reply"}}}})
	if _, err := st.Put(context.Background(), key, bytes.NewReader(theirs), int64(len(theirs)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// The check for a stored reply misses it, as it does while the other
	// delivery is still storing.
	es := errorstore.New(st, errorstore.Fault{Op: errorstore.Get, N: 1, Key: func(k string) bool { return k == key }, Err: store.ErrNotFound})
	ep := &endpoint{script: []func(http.ResponseWriter){says("my reply")}}
	s := llmStage(t, es, ep)
	parent, err := f.parent.Task(0)
	if err != nil {
		t.Fatal(err)
	}
	ev := testinfra.RootEvent(t, llmRun, schemas.SynthCandidate, "c", nil)
	resp, err := s.reply(context.Background(), ev, schemas.SynthCandidatePayload{Round: 1}, id, parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(ep.requests()) != 1 || resp.Choices[0].Message.Content != "their reply" {
		t.Fatalf("judged %q after %d requests, want the stored reply", resp.Choices[0].Message.Content, len(ep.requests()))
	}
	// The stored reply stays theirs.
	again, err := s.storedReply(context.Background(), key)
	if err != nil || again.ID != "theirs" {
		t.Fatalf("stored reply %+v, %v", again, err)
	}
}

// A stored reply whose body breaks off is the store's fault, retried, not
// an unreadable reply that fails the candidate for good.
func TestStoredReplyCutShort(t *testing.T) {
	st := testinfra.FreshStore(t)
	key := keys.SynthReply(llmRun, "llm-x")
	data, _ := json.Marshal(chat.Response{ID: "r", Choices: []chat.Choice{{Message: chat.Message{Role: "assistant", Content: "a reply"}}}})
	if _, err := st.Put(context.Background(), key, bytes.NewReader(data), int64(len(data)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	s := &stage{cfg: Config{Store: errorstore.New(st, errorstore.Fault{Op: errorstore.Get, After: true})}}
	if _, err := s.storedReply(context.Background(), key); !errors.Is(err, errorstore.ErrInjected) || engine.IsPermanent(err) {
		t.Fatalf("%v, want a retryable store error", err)
	}
}
