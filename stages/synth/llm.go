package synth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/chat"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

// LLMConfig is the llm generator: a chat model behind an OpenAI-compatible
// endpoint extends a parent task's files. Client reaches the endpoint the
// settings name, with their timeout.
type LLMConfig struct {
	LLMSettings
	Client *chat.Client
	// MaxReplyBytes bounds the completion's text (default 512 KiB).
	MaxReplyBytes int
}

// DefaultMaxReplyBytes bounds a completion's text when LLMConfig leaves it
// unset: several times what a task of a few hundred lines takes.
const DefaultMaxReplyBytes = 512 << 10

// maxReplyFiles bounds the files one reply may write.
const maxReplyFiles = 64

// Reply is the JSON object the model must answer with, alone or as the only
// content of one ```json fenced block:
//
//	{
//	  "instruction": "the whole new instruction.md",
//	  "files": {
//	    "solution/solve.sh": "the whole extended reference solution",
//	    "tests/test_outputs.py": "the whole new pytest module",
//	    "environment/setup.sh": "only when the new steps need new inputs"
//	  },
//	  "difficulty": "easy | medium | hard (optional)",
//	  "category": "optional"
//	}
//
// files maps paths relative to the task directory, under environment/,
// solution/ or tests/, to their full contents; a file left out stays the
// parent's. solution/solve.sh and at least one changed file under tests/
// are required. Unknown keys are refused.
type Reply struct {
	Instruction string            `json:"instruction"`
	Files       map[string]string `json:"files"`
	Difficulty  string            `json:"difficulty,omitempty"`
	Category    string            `json:"category,omitempty"`
}

const systemPrompt = `You extend terminal tasks that train shell agents. A task is a directory:
instruction.md (what the agent is asked to do), environment/ (setup.sh or a Dockerfile that
prepares /app before the agent starts), solution/solve.sh (the reference solution, a bash
script), and tests/ (test.sh runs pytest on tests/test_outputs.py, one test function per
assertion, reading the files the solution leaves behind).

Make the task longer, in this order:
1. Extend the reference solution with further executable steps that build on what it already
   produces. Keep every existing step.
2. Realign the environment, only if the new steps need new input files.
3. Realign the tests: keep every existing test function unchanged and add new ones, one per new
   check, each of which fails unless the new steps ran.
4. Rewrite the instruction so it asks for everything the tests check and names every path they
   read, without quoting test code.

Answer with one JSON object and nothing else:
{"instruction": "...", "files": {"solution/solve.sh": "...", "tests/test_outputs.py": "..."},
 "difficulty": "easy|medium|hard", "category": "..."}
"files" maps paths under environment/, solution/ or tests/ to their full new contents; list
solution/solve.sh and every file you change; a file you leave out stays as it is.`

// prompt asks for one extension of parent.
func prompt(parent *harbor.Task, round int) []chat.Message {
	var b strings.Builder
	fmt.Fprintf(&b, "Extend this task (synthesis round %d). Its files:\n", round)
	fmt.Fprintf(&b, "\n=== %s ===\n%s\n", harbor.InstructionFile, parent.Instruction)
	for _, p := range parent.Paths() {
		if p == harbor.InstructionFile || p == harbor.ConfigFile {
			continue
		}
		f, ok := parent.Files[p]
		if !ok {
			continue
		}
		if !utf8.Valid(f.Data) || bytes.IndexByte(f.Data, 0) >= 0 {
			fmt.Fprintf(&b, "\n=== %s === (binary, %d bytes, keep as is)\n", p, len(f.Data))
			continue
		}
		fmt.Fprintf(&b, "\n=== %s ===\n%s\n", p, f.Data)
	}
	return []chat.Message{{Role: "system", Content: systemPrompt}, {Role: "user", Content: b.String()}}
}

// parseReply turns a completion's text into the child of parent named
// name. The error is the reason to discard the reply; it never comes from
// anything but the reply itself.
func parseReply(text string, maxBytes int, parent *harbor.Task, name string, round int) (*harbor.Task, error) {
	if len(text) > maxBytes {
		return nil, fmt.Errorf("reply of %d bytes exceeds the limit of %d", len(text), maxBytes)
	}
	if !utf8.ValidString(text) {
		return nil, errors.New("reply is not valid UTF-8")
	}
	body := strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(body, "```"); ok {
		nl := strings.IndexByte(rest, '\n')
		if tag := strings.TrimSpace(rest[:max(nl, 0)]); nl < 0 || (tag != "" && tag != "json") || !strings.HasSuffix(rest, "```") {
			return nil, errors.New("reply is not one JSON object or one ```json fenced block")
		}
		body = strings.TrimSpace(strings.TrimSuffix(rest[nl+1:], "```"))
	}
	var r Reply
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("reply is not the JSON object asked for: %v", err)
	}
	if dec.More() {
		return nil, errors.New("reply has more after its JSON object")
	}
	if strings.TrimSpace(r.Instruction) == "" {
		return nil, errors.New("reply has no instruction")
	}
	if len(r.Files) > maxReplyFiles {
		return nil, fmt.Errorf("reply writes %d files, more than %d", len(r.Files), maxReplyFiles)
	}
	sol, ok := r.Files[harbor.SolutionPath]
	if !ok {
		return nil, fmt.Errorf("reply lacks %s", harbor.SolutionPath)
	}
	if sol == string(parent.Files[harbor.SolutionPath].Data) {
		return nil, fmt.Errorf("reply leaves %s as it was", harbor.SolutionPath)
	}
	md := parent.Config.Metadata
	switch r.Difficulty {
	case "":
	case "easy", "medium", "hard":
		md.Difficulty = r.Difficulty
	default:
		return nil, fmt.Errorf("reply gives difficulty %q (want easy, medium or hard)", r.Difficulty)
	}
	if c := strings.TrimSpace(r.Category); c != "" {
		md.Category = c
	}
	md.Tags = []string{"synthesized", fmt.Sprintf("round-%d", round), "generator-" + LLM}
	b := harbor.From(parent).Name(name).Instruction(r.Instruction).Metadata(md)
	testsChanged := false
	for _, p := range slices.Sorted(maps.Keys(r.Files)) {
		if err := replyPath(p); err != nil {
			return nil, fmt.Errorf("reply file %q: %v", p, err)
		}
		data := r.Files[p]
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if strings.HasPrefix(p, harbor.TestsDir+"/") && data != string(parent.Files[p].Data) {
			testsChanged = true
		}
		b = b.File(p, []byte(data), mode)
	}
	if !testsChanged {
		return nil, errors.New("reply changes no file under tests/")
	}
	t, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("reply does not make a valid task: %v", err)
	}
	if n, pn := solutionLines(t), solutionLines(parent); n <= pn {
		return nil, fmt.Errorf("the reference solution does not grow: %d command lines, the parent's has %d", n, pn)
	}
	return t, nil
}

// replyPath accepts a clean relative path under one of the directories a
// reply may write.
func replyPath(p string) error {
	switch {
	case p == "" || strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\\x00"):
		return errors.New("not a relative slash-separated path")
	case path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../"):
		return errors.New("not a clean path inside the task")
	case !strings.HasPrefix(p, harbor.EnvironmentDir+"/") && !strings.HasPrefix(p, "solution/") && !strings.HasPrefix(p, harbor.TestsDir+"/"):
		return errors.New("outside environment/, solution/ and tests/")
	}
	return nil
}

// solutionLines counts the command lines of a task's solve.sh: not blank,
// not comments.
func solutionLines(t *harbor.Task) int {
	n := 0
	for _, l := range strings.Split(string(t.Files[harbor.SolutionPath].Data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n
}

var testFunc = regexp.MustCompile(`(?m)^\s*(?:async\s+)?def\s+(test\w*)\s*\(`)

// testFunctions names the pytest functions of t's test modules.
func testFunctions(t *harbor.Task) []string {
	var out []string
	for _, p := range t.PytestFiles() {
		for _, m := range testFunc.FindAllStringSubmatch(string(t.Files[p].Data), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// llmTaskID names the candidate of event id: every candidate its own task,
// whatever the model answers.
func llmTaskID(eventID string) string {
	sum := sha256.Sum256([]byte("llm/" + eventID))
	return "llm-" + hex.EncodeToString(sum[:6])
}

// llmCandidate asks the model to extend the parent, then keeps the child
// by the same execution checks as a built-in one.
func (s *stage) llmCandidate(ctx context.Context, ev engine.Event, p schemas.SynthCandidatePayload, out engine.Emitter) error {
	g := s.cfg.LLM
	if g == nil || g.Client == nil {
		return engine.Permanent(errors.New("synth: the candidate asks for the llm generator, which is not configured"))
	}
	if p.ParentID == "" {
		return engine.Permanent(errors.New("synth: an llm candidate needs a parent"))
	}
	id := llmTaskID(ev.ID)
	discard := func(reason string) error {
		_, err := out.Emit(schemas.SynthDiscarded, schemas.SynthDiscardedPayload{TaskID: id, ParentID: p.ParentID, Round: p.Round, Reason: reason}, engine.WithKey(id))
		return err
	}
	work, releaseWork, err := hostres.MkdirTemp(s.cfg.TempDir, "t1-synth-", "synth scratch")
	if err != nil {
		return err
	}
	defer releaseWork()
	parent, _, err := trial.Fetch(ctx, s.cfg.Store, ev.Run, p.ParentID, schemas.ObjectRef{}, filepath.Join(work, "parent"))
	if trial.Unusable(err) {
		return engine.Permanent(fmt.Errorf("parent %s: %w", p.ParentID, err))
	}
	if err != nil {
		return err
	}
	resp, err := s.reply(ctx, ev, p, id, parent)
	var se *chat.StatusError
	var bad *chat.BadReply
	switch {
	case errors.As(err, &se) && se.Permanent():
		return engine.Permanent(fmt.Errorf("llm generator: %w", err))
	case errors.As(err, &bad), errors.Is(err, chat.ErrTooLarge):
		return discard(err.Error())
	case err != nil:
		return fmt.Errorf("llm generator: %w", err)
	}
	maxBytes := g.MaxReplyBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxReplyBytes
	}
	t, err := parseReply(resp.Choices[0].Message.Content, maxBytes, parent, id, p.Round)
	if err != nil {
		return discard(err.Error())
	}
	v, err := ExecuteTask(ctx, t, Expect{Known: testFunctions(parent), ParentSolution: parent.Files[harbor.SolutionPath].Data},
		filepath.Join(work, id), s.cfg.Trial)
	if err != nil {
		return fmt.Errorf("execute %s: %w", id, err)
	}
	if !v.Keep {
		return discard(v.Reason)
	}
	root := p.RootID
	if root == "" {
		root = p.ParentID
	}
	lin := Lineage{TaskID: id, ParentID: p.ParentID, RootID: root, Round: p.Round, Generator: LLM, Model: g.Model, Reply: keys.SynthReply(ev.Run, id)}
	md := t.Config.Metadata
	return s.keep(ctx, ev, out, lin, t, md.Category, md.Difficulty, solutionLines(t))
}

// reply is the model's answer for candidate id: the stored one when an
// earlier delivery got it, else a new request, stored before it is judged.
func (s *stage) reply(ctx context.Context, ev engine.Event, p schemas.SynthCandidatePayload, id string, parent *harbor.Task) (*chat.Response, error) {
	key := keys.SynthReply(ev.Run, id)
	if resp, err := s.storedReply(ctx, key); resp != nil || err != nil {
		return resp, err
	}
	g := s.cfg.LLM
	req := chat.Request{Model: g.Model, Messages: prompt(parent, p.Round), Temperature: g.Temperature, MaxTokens: g.MaxTokens,
		Seed: int64(rngFor(p.Seed^g.Seed, "llm/"+ev.ID).Uint64() >> 1)}
	resp, err := g.Client.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	stored, mine, err := store.PutOnce(ctx, s.cfg.Store, key, data, store.PutOptions{ContentType: "application/json"})
	if err != nil {
		return nil, fmt.Errorf("store reply: %w", err)
	}
	if !mine {
		// A concurrent delivery stored its reply first; judge that one.
		return decodeReply(key, stored)
	}
	return resp, nil
}

// storedReply reads the reply at key; nil, nil when there is none.
func (s *stage) storedReply(ctx context.Context, key string) (*chat.Response, error) {
	rc, _, err := s.cfg.Store.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stored reply %s: %w", key, err)
	}
	// Read it whole first: a connection cut mid-body is the store's fault
	// and retried; only a reply that arrived is judged.
	data, err := io.ReadAll(io.LimitReader(rc, store.MaxOnceBytes))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("stored reply %s: %w", key, err)
	}
	return decodeReply(key, data)
}

// decodeReply decodes the reply stored at key.
func decodeReply(key string, data []byte) (*chat.Response, error) {
	var resp chat.Response
	if err := json.Unmarshal(data, &resp); err != nil || len(resp.Choices) == 0 {
		return nil, engine.Permanent(fmt.Errorf("stored reply %s is unreadable: %v", key, err))
	}
	return &resp, nil
}
