package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/chat"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trial"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

const (
	llmRun = "llm"
	apiKey = "sk-scripted-0123456789"
)

// endpoint is a scripted chat-completions server: it speaks the OpenAI
// wire format over real HTTP and answers the n-th request with the n-th
// step of its script (the last one repeating). It stands in for a model
// the way the scripted policy does in package agent: the subject under
// test is t1's client, reply parsing and execution checks, not a model.
type endpoint struct {
	mu     sync.Mutex
	reqs   []chat.Request
	script []func(w http.ResponseWriter)
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != chat.Path {
		http.Error(w, "no such endpoint", http.StatusNotFound)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+apiKey {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error"}}`, strings.TrimPrefix(got, "Bearer "))
		return
	}
	var req chat.Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	e.reqs = append(e.reqs, req)
	step := e.script[min(len(e.reqs), len(e.script))-1]
	e.mu.Unlock()
	step(w)
}

func (e *endpoint) requests() []chat.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]chat.Request(nil), e.reqs...)
}

func says(content string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		json.NewEncoder(w).Encode(chat.Response{ID: "scripted", Object: "chat.completion", Model: "scripted",
			Choices: []chat.Choice{{Message: chat.Message{Role: "assistant", Content: content}, FinishReason: "stop"}}})
	}
}

func fails(code int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { http.Error(w, `{"error":{"message":"model is loading"}}`, code) }
}

func rawBody(body []byte) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.Write(body) }
}

// reply renders a Reply as the model should write it.
func reply(instruction string, files map[string]string) string {
	data, _ := json.Marshal(Reply{Instruction: instruction, Files: files, Difficulty: "medium"})
	return string(data)
}

// family is a parent task and a child that taskgen grew from it: the
// child's files are a good extension, which the built-in generator's own
// checks keep.
type family struct {
	parentRefs    []taskgen.StepRef
	parent, child *taskgen.Spec
}

func newFamily(t *testing.T) family {
	t.Helper()
	refs := []taskgen.StepRef{{Name: "source.log", Seed: 1, Input: -1}, {Name: "text.count", Seed: 2, Input: 0}}
	childRefs, err := taskgen.Extend(taskgen.Full, refs, 2, rand.New(rand.NewPCG(3, 3)))
	if err != nil {
		t.Fatal(err)
	}
	parent, err := taskgen.Build(refs)
	if err != nil {
		t.Fatal(err)
	}
	child, err := taskgen.Build(childRefs)
	if err != nil {
		t.Fatal(err)
	}
	return family{refs, parent, child}
}

func (f family) files() map[string]string {
	return map[string]string{
		"environment/setup.sh":  f.child.SetupScript(),
		"solution/solve.sh":     f.child.SolveScript(),
		"tests/test_outputs.py": f.child.TestFile(),
	}
}

func (f family) with(p, data string) map[string]string {
	files := f.files()
	files[p] = data
	return files
}

// store puts the parent in the run as a kept round-0 task.
func (f family) store(t *testing.T, st store.ObjectStore) {
	t.Helper()
	ctx := context.Background()
	tk, err := f.parent.Task(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := trial.PutBundle(ctx, st, llmRun, f.parent.ID(), tk); err != nil {
		t.Fatal(err)
	}
	lin, _ := json.Marshal(Lineage{TaskID: f.parent.ID(), RootID: f.parent.ID(), Steps: f.parentRefs, Generator: Builtin})
	if _, err := st.Put(ctx, keys.Lineage(llmRun, f.parent.ID()), bytes.NewReader(lin), int64(len(lin)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// outcome runs one round-1 request for f's parent through a synth stage
// using the llm generator against the server ep, and returns the one event that
// settles its candidate. Each call has its own log, store prefix and
// server, and mostly waits on the sandbox and the log, so the tests that
// call it run in parallel.
func outcome(t *testing.T, f family, ep http.Handler, key string) (engine.Event, store.ObjectStore) {
	t.Helper()
	st := testinfra.Store(t)
	l := testinfra.Log(t)
	f.store(t, st)
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	client := &chat.Client{URL: srv.URL, APIKey: key, Backoff: 10 * time.Millisecond, Attempts: 3, Timeout: 30 * time.Second}
	testinfra.RunStage(t, l, New(Config{Store: st, Trial: trial.Options{Backend: testinfra.Bubblewrap(t)}, Generator: LLM,
		LLM: &LLMConfig{LLMSettings: LLMSettings{Model: "scripted", Temperature: 0.2, MaxTokens: 4096, Seed: 7}, Client: client, MaxReplyBytes: 64 << 10}}), testinfra.Runner(1))
	ev, err := engine.NewRootEvent(llmRun, schemas.SynthRequested, "round-1",
		schemas.SynthRequestedPayload{Round: 1, SeedIDs: []string{f.parent.ID()}, PerSeed: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	settled := []string{schemas.SynthDiscarded, schemas.TaskSynthesized, engine.FailedType(schemas.SynthCandidate)}
	var got []engine.Event
	testinfra.CheckFor(t, 2*time.Minute, func() error {
		got = got[:0]
		for _, typ := range settled {
			got = append(got, testinfra.Events(t, l, "t1."+llmRun+"."+typ)...)
		}
		if len(got) == 0 {
			return fmt.Errorf("the candidate has not settled")
		}
		return nil
	})
	if len(got) != 1 {
		t.Fatalf("%d settling events for one candidate", len(got))
	}
	return got[0], st
}

func TestLLMGeneratorKeepsAGoodExtensionByExecution(t *testing.T) {
	t.Parallel()
	f := newFamily(t)
	ep := &endpoint{script: []func(http.ResponseWriter){says(reply(f.child.Instruction, f.files()))}}
	ev, st := outcome(t, f, ep, apiKey)
	var p schemas.TaskSynthesizedPayload
	if ev.Type != schemas.TaskSynthesized || ev.Decode(&p) != nil {
		t.Fatalf("%s: %s", ev.Type, ev.Payload)
	}
	if p.ParentID != f.parent.ID() || p.Round != 1 || !strings.HasPrefix(p.TaskID, "llm-") || p.Difficulty != "medium" {
		t.Fatalf("task.synthesized %+v", p)
	}
	reqs := ep.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "scripted" || r.Temperature != 0.2 || r.MaxTokens != 4096 || r.Seed == 0 || r.Stream ||
		len(r.Messages) != 2 || !strings.Contains(r.Messages[1].Content, f.parent.SolveScript()) {
		t.Fatalf("request %+v", r)
	}
	ctx := context.Background()
	rc, _, err := st.Get(ctx, keys.Lineage(llmRun, p.TaskID))
	if err != nil {
		t.Fatal(err)
	}
	var lin Lineage
	err = json.NewDecoder(rc).Decode(&lin)
	rc.Close()
	if err != nil || lin.Generator != LLM || lin.Model != "scripted" || lin.ParentID != f.parent.ID() || lin.RootID != f.parent.ID() {
		t.Fatalf("lineage %+v, %v", lin, err)
	}
	if _, _, err := st.Get(ctx, lin.Reply); err != nil {
		t.Fatalf("stored reply: %v", err)
	}
	rows, err := schemas.ReadRows[schemas.TaskRow](ctx, st, p.Task.Key, &p.Task)
	if err != nil || len(rows) != 1 || rows[0].Source != "synth" || !rows[0].SolutionPassed || rows[0].Instruction != f.child.Instruction {
		t.Fatalf("tasks row %+v, %v", rows, err)
	}
	tk, err := trial.FetchBundle(ctx, st, p.Bundle.Key, p.Bundle.SHA256, t.TempDir()+"/task")
	if err != nil || string(tk.Files["solution/solve.sh"].Data) != f.child.SolveScript() {
		t.Fatalf("bundle: %v", err)
	}
}

// Replies that execution, not parsing, rejects.
func TestLLMGeneratorDiscardsWhatExecutionRejects(t *testing.T) {
	t.Parallel()
	f := newFamily(t)
	again := f.parent.Checks[0]
	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"the oracle fails an assertion": {
			f.with("tests/test_outputs.py", f.child.TestFile()+"\n\ndef test_zz_never():\n    assert Path(\"/app/never/made.txt\").exists()\n"),
			"reference solution passed",
		},
		"the parent's solution passes the new assertion": {
			f.with("tests/test_outputs.py", f.parent.TestFile()+"\n\ndef test_zz_again():\n    "+strings.Join(again.Body, "\n    ")+"\n"),
			"the parent's solution already passes the new assertion",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ep := &endpoint{script: []func(http.ResponseWriter){says(reply(f.child.Instruction, c.files))}}
			ev, _ := outcome(t, f, ep, apiKey)
			var p schemas.SynthDiscardedPayload
			if ev.Type != schemas.SynthDiscarded || ev.Decode(&p) != nil || !strings.Contains(p.Reason, c.want) {
				t.Fatalf("%s: %s, want a discard saying %q", ev.Type, ev.Payload, c.want)
			}
			t.Log(p.Reason)
		})
	}
}

// Malformed and hostile replies are discarded with the reason, before
// anything runs.
func TestLLMGeneratorDiscardsMalformedReplies(t *testing.T) {
	t.Parallel()
	f := newFamily(t)
	good := f.files()
	noSolution := f.files()
	delete(noSolution, "solution/solve.sh")
	cases := map[string]struct {
		step func(http.ResponseWriter)
		want string
	}{
		"prose":            {says("Sure! Here is a longer task: first sort the log, then…"), "reply is not the JSON object asked for"},
		"unknown key":      {says(`{"instruction": "x", "files": {}, "notes": "y"}`), "unknown field"},
		"no instruction":   {says(reply(" ", good)), "reply has no instruction"},
		"no solution":      {says(reply(f.child.Instruction, noSolution)), "reply lacks solution/solve.sh"},
		"tests unchanged":  {says(reply(f.child.Instruction, f.with("tests/test_outputs.py", f.parent.TestFile()))), "reply changes no file under tests/"},
		"traversal":        {says(reply(f.child.Instruction, f.with("tests/../../../etc/cron.d/t1", "* * * * * root id\n"))), "not a clean path"},
		"absolute path":    {says(reply(f.child.Instruction, f.with("/etc/passwd", "root::0:0::/:/bin/sh\n"))), "not a relative slash-separated path"},
		"outside the task": {says(reply(f.child.Instruction, f.with("task.toml", "[metadata]\n"))), "outside environment/, solution/ and tests/"},
		"huge":             {says(reply(f.child.Instruction, f.with("tests/big.txt", strings.Repeat("x", 100<<10)))), "exceeds the limit"},
		"not UTF-8": {rawBody([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"{\"instruction\": \"caf` + "\xe9\xff" + `\"}"}}]}`)),
			"not valid UTF-8"},
		"not a completion": {rawBody([]byte("<html>gateway</html>")), "not a chat completion"},
		"open fence":       {says("```json\n" + reply(f.child.Instruction, good)), "fenced block"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ev, _ := outcome(t, f, &endpoint{script: []func(http.ResponseWriter){c.step}}, apiKey)
			var p schemas.SynthDiscardedPayload
			if ev.Type != schemas.SynthDiscarded || ev.Decode(&p) != nil || !strings.Contains(p.Reason, c.want) {
				t.Fatalf("%s: %s, want a discard saying %q", ev.Type, ev.Payload, c.want)
			}
			t.Log(p.Reason)
		})
	}
}

// A server error is retried; the fenced reply that follows is kept.
func TestLLMGeneratorRetriesServerErrors(t *testing.T) {
	t.Parallel()
	f := newFamily(t)
	ep := &endpoint{script: []func(http.ResponseWriter){fails(http.StatusInternalServerError),
		says("```json\n" + reply(f.child.Instruction, f.files()) + "\n```")}}
	ev, _ := outcome(t, f, ep, apiKey)
	if ev.Type != schemas.TaskSynthesized {
		t.Fatalf("%s: %s", ev.Type, ev.Payload)
	}
	if n := len(ep.requests()); n != 2 {
		t.Fatalf("%d requests, want the failed one and its retry", n)
	}
}

// A rejected API key fails the candidate for good, with the status and
// the server's message, and without the key.
func TestLLMGeneratorFailsOnAClientError(t *testing.T) {
	f := newFamily(t)
	wrong := "sk-wrong-9876543210-secret"
	ep := &endpoint{script: []func(http.ResponseWriter){says("unreachable")}}
	ev, st := outcome(t, f, ep, wrong)
	var fl engine.Failure
	if ev.Type != engine.FailedType(schemas.SynthCandidate) || ev.Decode(&fl) != nil {
		t.Fatalf("%s: %s", ev.Type, ev.Payload)
	}
	if !strings.Contains(fl.Reason, "HTTP 401") || !strings.Contains(fl.Reason, "Incorrect API key") || strings.Contains(fl.Reason, wrong) || fl.Attempts != 1 {
		t.Fatalf("failure %+v", fl)
	}
	if strings.Contains(string(ev.Payload), wrong) {
		t.Fatal("the key reached the event")
	}
	for obj, err := range st.List(context.Background(), keys.Run(llmRun)+keys.KindSynth+"/") {
		t.Fatalf("a reply was stored: %s, %v", obj.Key, err)
	}
}

// Against a real model endpoint — the reference MoE behind t1's inference
// server — the untrained model's reply is discarded for what it is.
func TestLLMGeneratorAgainstTheReferenceModel(t *testing.T) {
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	cfg := moe.DefaultConfig()
	cfg.Context = 512
	m, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := inference.NewServer(inference.NewReference(m, tok, moe.BF16, "0"), "t1-reference", nil)
	ev, _ := outcome(t, newFamily(t), srv, "")
	var p schemas.SynthDiscardedPayload
	if ev.Type != schemas.SynthDiscarded || ev.Decode(&p) != nil || !strings.HasPrefix(p.Reason, "reply ") {
		t.Fatalf("%s: %s, want a discarded reply", ev.Type, ev.Payload)
	}
	t.Log(p.Reason)
}

// FuzzParseReply: no reply panics the parser, and whatever it accepts is a
// valid task that writes only under environment/, solution/ and tests/.
func FuzzParseReply(f *testing.F) {
	fam := family{}
	refs := []taskgen.StepRef{{Name: "source.log", Seed: 1, Input: -1}, {Name: "text.count", Seed: 2, Input: 0}}
	fam.parent, _ = taskgen.Build(refs)
	childRefs, _ := taskgen.Extend(taskgen.Full, refs, 2, rand.New(rand.NewPCG(3, 3)))
	fam.child, _ = taskgen.Build(childRefs)
	parent, err := fam.parent.Task(0)
	if err != nil {
		f.Fatal(err)
	}
	good := reply(fam.child.Instruction, fam.files())
	for _, s := range []string{good, "```json\n" + good + "\n```", "{}", `{"instruction":"x","files":{"solution/solve.sh":"a\nb\nc\nd\ne\nf\ng\n","tests/../x":""}}`, "[1]", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		tk, err := parseReply(text, DefaultMaxReplyBytes, parent, "llm-fuzz", 1)
		if err != nil {
			return
		}
		if err := tk.Validate(); err != nil {
			t.Fatalf("accepted an invalid task: %v", err)
		}
		for p := range tk.Files {
			if _, was := parent.Files[p]; !was && replyPath(p) != nil {
				t.Fatalf("accepted a file at %q", p)
			}
		}
	})
}
