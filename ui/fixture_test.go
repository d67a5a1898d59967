package ui

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// fixture is a server over a run of hand-written events and tables in
// the embedded bus and S3 gateway.
type fixture struct {
	run   string
	log   *engine.Log
	st    store.ObjectStore
	srv   *Server
	refs  map[string]schemas.FileRef // by table, the last written
	model schemas.ModelDims
}

func newFixture(t testing.TB, run string) *fixture {
	t.Helper()
	f := &fixture{run: run, log: testinfra.Log(t), st: testinfra.FreshStore(t), refs: map[string]schemas.FileRef{},
		model: schemas.ModelDims{Vocab: 512, Layers: 4, TopK: 2, Experts: 8}}
	f.srv = &Server{Log: f.log, Store: f.st}
	f.publish(t, schemas.RunStarted, "start", schemas.RunStartedPayload{Seed: 1, Iterations: 2, Model: f.model})
	return f
}

func (f *fixture) publish(t testing.TB, typ, key string, payload any) {
	t.Helper()
	if _, err := f.log.Publish(context.Background(), testinfra.RootEvent(t, f.run, typ, key, payload)); err != nil {
		t.Fatal(err)
	}
}

func write[R schemas.Row](t testing.TB, f *fixture, iteration int, rows []R) {
	t.Helper()
	ref, err := schemas.WriteTable(context.Background(), f.st, f.run, iteration, rows, schemas.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.refs[ref.Table] = ref
}

// attempt writes one training attempt of tokens tokens in chunks of at
// most chunk tokens, a turn every 512 tokens (its last 64 sampled),
// with its reward, advantages and routing.
func (f *fixture) attempt(t testing.TB, iteration int, task string, version int64, tokens, chunk int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(tokens), uint64(iteration)))
	var toks []schemas.TokenRow
	var vals []schemas.ValueRow
	var rts []schemas.RoutingRow
	var turns []schemas.TurnRow
	turn := 0
	for c := 0; c*chunk < tokens; c++ {
		n := min(chunk, tokens-c*chunk)
		tr := schemas.TokenRow{Run: f.run, TaskID: task, Chunk: int32(c), Iteration: int32(iteration), PolicyVersion: version,
			DriftRepair: "none", Temperature: 1, TopP: 1}
		v := schemas.ValueRow{Run: f.run, TaskID: task, Chunk: int32(c), Iteration: int32(iteration), PolicyVersion: version}
		if c > 0 {
			tr.DriftRepair = "strict_prefix"
		}
		for i := range n {
			sampled := i%512 >= 448
			tr.TokenIDs = append(tr.TokenIDs, int32(rng.IntN(f.model.Vocab)))
			tr.LossMask = append(tr.LossMask, sampled)
			lp, a := float32(0), float32(0)
			if sampled {
				lp, a = -float32(rng.ExpFloat64()), float32(rng.NormFloat64())
			}
			tr.LogProbs = append(tr.LogProbs, lp)
			v.Values = append(v.Values, 0)
			v.Advantages = append(v.Advantages, a)
			v.Returns = append(v.Returns, 0)
			if i%512 == 448 {
				tr.TurnOffsets = append(tr.TurnOffsets, int32(i))
				turns = append(turns, schemas.TurnRow{Run: f.run, TaskID: task, Turn: int32(turn), Chunk: int32(c),
					Action: fmt.Sprintf("echo <b>turn %d</b>", turn), Observation: fmt.Sprintf("turn %d", turn), CompletionTokens: 64,
					Compacted: c > 0 && len(tr.TurnOffsets) == 1, Purpose: "train", PolicyVersion: version, Iteration: int32(iteration)})
				turn++
			}
		}
		rec, err := routing.Uniform(rng, n, f.model.Layers, f.model.TopK, f.model.Experts)
		if err != nil {
			t.Fatal(err)
		}
		row, err := schemas.NewRoutingRow(f.run, task, 0, c, rec, routing.Packed)
		if err != nil {
			t.Fatal(err)
		}
		row.PolicyVersion, row.Iteration = version, int32(iteration)
		toks, vals, rts = append(toks, tr), append(vals, v), append(rts, row)
	}
	write(t, f, iteration, toks)
	write(t, f, iteration, vals)
	write(t, f, iteration, rts)
	write(t, f, iteration, turns)
	write(t, f, iteration, []schemas.TrajectoryRow{{Run: f.run, TaskID: task, Iteration: int32(iteration), Purpose: "train",
		PolicyVersion: version, Turns: int32(turn), Tokens: int64(tokens), Chunks: int32(len(toks)), Termination: "task_complete",
		Sandbox: "bwrap", Isolated: true}})
	write(t, f, iteration, []schemas.RewardRow{{Run: f.run, TaskID: task, Iteration: int32(iteration), Purpose: "train",
		PolicyVersion: version, Passed: 1, Total: 2, Scale: 1, Reward: 0.5, Source: "ctrf",
		Assertions: []schemas.Assertion{{Name: "file_exists", Passed: true}, {Name: "holds_word", Passed: false}}}})
}

// get is the server's answer to a GET of path.
func (f *fixture) get(t testing.TB, path string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

// attemptPath is the page of the fixture's attempt of task.
func (f *fixture) attemptPath(iteration int, task string, version int64) string {
	return fmt.Sprintf("/runs/%s/attempt?it=%d&purpose=train&v=%d&task=%s&n=0", f.run, iteration, version, task)
}
