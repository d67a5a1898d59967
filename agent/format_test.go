package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/tokenizer"
)

func TestTerminusParse(t *testing.T) {
	f := terminus{}
	r, err := f.Parse("<think>\nhmm {not json}\n</think>\n{\"analysis\": \"empty dir\", \"plan\": \"make it\", \"commands\": [{\"keystrokes\": \"mkdir -p out\\n\", \"duration\": 0.1}, {\"keystrokes\": \"ls\\n\"}], \"task_complete\": false}")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Commands) != 2 || r.Commands[0].Script != "mkdir -p out" || r.Commands[1].Script != "ls" || r.Complete {
		t.Fatalf("%+v", r)
	}
	if r, err := f.Parse(`{"analysis": "", "plan": "", "commands": [], "task_complete": true}`); err != nil || !r.Complete {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{
		"no json here",
		`{"analysis": "", "plan": "", "commands": [{"keystrokes": "C-c"}]}`,
		`{"analysis": "", "plan": ""}`,
		`{"analysis": "", "plan": "", "commands": [{"keystrokes": "ls\n", "duration": -1}]}`,
		`{"analysis": "", "plan": "", "commands": [], "extra": 1}`,
		`{"plan": "", "commands": []}`,
	} {
		if _, err := f.Parse(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestToolCallsParse(t *testing.T) {
	f := toolCalls{}
	r, err := f.Parse("<think>\nI could <tool_call> later\n</think>\n\n" + lsCall + "\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"make\", \"timeout\": 90}}\n</tool_call>")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Commands) != 2 || r.Commands[0].Script != "ls /app" || r.Commands[1].Timeout != 90*time.Second || r.Complete {
		t.Fatalf("%+v", r)
	}
	if r, err := f.Parse("All done: the files are listed."); err != nil || !r.Complete {
		t.Fatalf("a reply without a call is the final answer: %+v %v", r, err)
	}
	for _, bad := range []string{
		"<tool_call>\n{\"name\": \"bash\"",
		"<tool_call>{\"name\": \"python\", \"arguments\": {\"code\": \"1\"}}</tool_call>",
		"<tool_call>{\"name\": \"bash\", \"arguments\": {}}</tool_call>",
		"<tool_call>{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\", \"cwd\": \"/\"}}</tool_call>",
		"<tool_call>{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\", \"timeout\": 0}}</tool_call>",
		"done</tool_call>",
	} {
		if _, err := f.Parse(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// Each format's demonstration is read back by its own parser as the
// commands it was made of, then the completion.
func TestFormatDemo(t *testing.T) {
	cmds := []string{"echo 'a \"b\"' > x", "cat <<EOF\nhi\nEOF"}
	for _, name := range Formats {
		f, _ := NewFormat(name)
		replies := f.Demo(cmds)
		for i, c := range cmds {
			r, err := f.Parse(replies[i])
			if err != nil || len(r.Commands) != 1 || r.Commands[0].Script != c || r.Complete {
				t.Fatalf("%s reply %d %q: %+v %v", name, i, replies[i], r, err)
			}
		}
		for _, done := range replies[len(cmds):] {
			if r, err := f.Parse(done); err != nil || !r.Complete || len(r.Commands) != 0 {
				t.Fatalf("%s completion %q: %+v %v", name, done, r, err)
			}
		}
	}
	if got := (toolCalls{}).Demo(cmds[:1])[0]; !strings.Contains(got, `"arguments": {"command": "echo 'a \"b\"' > x"}}`) {
		t.Fatalf("a demonstrated call is not written as the model writes it: %s", got)
	}
	if _, err := NewFormat("xml"); err == nil {
		t.Fatal("accepted an unknown format")
	}
}

// An episode on Qwen3's template with native tool calls: observations go
// back as tool messages, a malformed call earns a corrective and is
// counted, a reply without a call completes, and every boundary is a
// strict prefix (the sampled text is kept as written).
func TestEpisodeQwen3ToolCalls(t *testing.T) {
	t.Parallel()
	tp := qwen3(t, "template")
	pol := NewScripted(tp, []string{
		"<think>\nMake the file.\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"echo hi > /tmp/a.txt\"}}\n</tool_call>",
		"<think>\nCheck it.\n</think>\n\n<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"cat /tmp/a.txt\"}}\n</tool_call>",
		"<think>\nThe tool is bash.\n</think>\n\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"cat /tmp/a.txt\"}}\n</tool_call>",
		"<think>\nIt says hi.\n</think>\n\nThe file holds hi.",
	})
	cfg := Config{SystemPrompt: ToolCallsSystemPrompt, Model: ModelSettings{ActionFormat: FormatToolCalls}}
	res, err := Run(context.Background(), pol, tp, shell(t), "Write hi to /tmp/a.txt.", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Termination != EndComplete || len(res.Turns) != 4 || res.Malformed != 1 || res.Turns[1].ParseError == "" {
		t.Fatalf("termination %s, %d turns, %d malformed: %+v", res.Termination, len(res.Turns), res.Malformed, res.Turns)
	}
	if !strings.Contains(res.Turns[2].Observation, "hi") || !strings.Contains(res.Turns[1].Observation, "bash") {
		t.Fatalf("observations %q, %q", res.Turns[1].Observation, res.Turns[2].Observation)
	}
	if res.LossDrift != 0 || res.Repairs[schemas.RepairStrictPrefix] != 3 || len(res.Chunks) != 1 {
		t.Fatalf("repairs %v, %d chunks, loss drift %d", res.Repairs, len(res.Chunks), res.LossDrift)
	}
	text, _ := tp.tok.Decode(res.Chunks[0].IDs)
	if strings.Count(text, "<tool_response>") != 3 {
		t.Fatalf("observations did not go back as tool responses:\n%s", text)
	}
}

// Terminus-2's JSON: a completion counts when it is declared twice in a
// row, and a reply in between withdraws it.
func TestEpisodeTerminusConfirmsCompletion(t *testing.T) {
	tp := template(t)
	f := terminus{}
	done := `{"analysis": "done", "plan": "", "commands": [], "task_complete": true}`
	pol := NewScripted(OwnChat(tp), []string{
		f.Demo([]string{"echo hi > /tmp/b.txt"})[0],
		done,
		`{"analysis": "one more look", "plan": "", "commands": [{"keystrokes": "cat /tmp/b.txt\n", "duration": 0.1}], "task_complete": false}`,
		done,
		"not json",
		done,
		done,
	})
	cfg := Config{SystemPrompt: TerminusSystemPrompt, Model: ModelSettings{ActionFormat: FormatTerminus}}
	res, err := Run(context.Background(), pol, OwnChat(tp), shell(t), "Write hi to /tmp/b.txt.", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Termination != EndComplete || len(res.Turns) != 7 || res.Malformed != 1 {
		t.Fatalf("termination %s after %d turns, %d malformed", res.Termination, len(res.Turns), res.Malformed)
	}
	for _, i := range []int{1, 3, 5} {
		if !strings.Contains(res.Turns[i].Observation, "Are you sure") || res.Turns[i].Complete {
			t.Fatalf("turn %d: the first completion must be questioned: %q", i, res.Turns[i].Observation)
		}
	}
	if !strings.Contains(res.Turns[2].Observation, "hi") {
		t.Fatalf("turn 2 observation %q", res.Turns[2].Observation)
	}
}

// summarisingPolicy runs a command every turn and, asked for a summary,
// writes one.
type summarisingPolicy struct{ chat Chat }

const testSummary = "I printed the numbers twice; nothing remains but to finish."

func (p summarisingPolicy) Generate(_ context.Context, req inference.GenerateRequest) (*inference.GenerateResponse, error) {
	prompt, _ := p.chat.Tokenizer().Decode(req.InputIDs)
	reply := "<command>seq 1 20</command>"
	switch {
	case strings.Contains(prompt, SummaryPrompt):
		reply = testSummary
	case strings.Contains(prompt, testSummary):
		reply = "<task_complete/>"
	}
	ids := p.chat.reply(reply)
	lps := make([]float32, len(ids))
	for i := range lps {
		lps[i] = -0.5
	}
	return &inference.GenerateResponse{OutputIDs: ids, OutputTokenLogprobs: lps, FinishReason: inference.FinishStop, RoutingUnavailable: "test"}, nil
}

// Compaction written by the policy: the summary is a turn of its own at
// the end of the chunk it was written in, trained on or not as
// configured, and the next chunk carries it on after the instruction.
func TestEpisodePolicyCompaction(t *testing.T) {
	chat := OwnChat(template(t))
	for _, loss := range []bool{false, true} {
		cfg := Config{Context: 1536, MaxNewTokens: 40, Model: ModelSettings{Compaction: CompactPolicy, SummaryLoss: loss}}
		res, err := Run(context.Background(), summarisingPolicy{chat}, chat, instantShell{}, "Print numbers.", cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var sum *Turn
		for i := range res.Turns {
			if res.Turns[i].Summary {
				sum = &res.Turns[i]
			}
		}
		if sum == nil || sum.Reply != testSummary || res.Termination != EndComplete || res.Repairs["compaction"] != 1 || res.LossDrift != 0 {
			t.Fatalf("summary %+v, termination %s, repairs %v", sum, res.Termination, res.Repairs)
		}
		if len(res.Chunks) != 2 || res.Chunks[1].Opened != "compaction" {
			t.Fatalf("%d chunks", len(res.Chunks))
		}
		first, second := res.Chunks[0], res.Chunks[1]
		text, _ := chat.Tokenizer().Decode(first.IDs)
		if strings.Contains(text, testSummary) != loss {
			t.Fatalf("summary_loss %v: the first chunk holds the summary: %v", loss, !loss)
		}
		if !first.Loss[len(first.Loss)-1] {
			t.Fatal("a closed chunk must end at a sampled id")
		}
		next, _ := chat.Tokenizer().Decode(second.IDs)
		if !strings.Contains(next, "Print numbers.") || !strings.Contains(next, testSummary) {
			t.Fatalf("the chunk after compaction does not carry the summary on: %q", next)
		}
	}
}

func TestModelSettingsCheck(t *testing.T) {
	check := func(m ModelSettings) []string {
		var errs []string
		m.Check(func(path, format string, args ...any) { errs = append(errs, path+": "+fmt.Sprintf(format, args...)) })
		return errs
	}
	if errs := check(DefaultModelSettings()); len(errs) != 0 {
		t.Fatalf("defaults refused: %v", errs)
	}
	ok := ModelSettings{Tokenizer: qwen3Dir, ActionFormat: FormatToolCalls, Thinking: "off", Compaction: CompactPolicy, SummaryLoss: true}
	if errs := check(ok); len(errs) != 0 {
		t.Fatalf("refused %+v: %v", ok, errs)
	}
	for _, bad := range []ModelSettings{
		{ActionFormat: "xml", Thinking: "template", Compaction: CompactMechanical},
		{Tokenizer: t.TempDir(), ActionFormat: FormatTags, Thinking: "template", Compaction: CompactMechanical, SummaryLoss: false}, // no tokenizer.json
		{ActionFormat: FormatTags, Thinking: "template", Compaction: "llm"},
		{ActionFormat: FormatTags, Thinking: "template", Compaction: CompactMechanical, SummaryLoss: true},
	} {
		if errs := check(bad); len(errs) != 1 {
			t.Errorf("%+v: %v", bad, errs)
		}
	}
	if !DefaultModelSettings().IsZero() || ok.IsZero() {
		t.Fatal("only the defaults stay out of the configuration hash")
	}
}

// Config.Chat builds the rendering the model settings name, once per
// process for a model directory; without one, the policy checkpoint's
// tokenizer decides: t1's own renders with t1's template, a Hugging Face
// model's with the template its files carry.
func TestConfigChat(t *testing.T) {
	t.Parallel()
	own := template(t).Tokenizer()
	c, err := Config{}.Chat(own)
	if err != nil || c.Tools() != nil || c.ObservationRole() != "user" {
		t.Fatalf("default chat %T, %v", c, err)
	}
	for _, m := range []ModelSettings{{ActionFormat: FormatToolCalls}, {Thinking: "on"}} {
		if _, err := (Config{Model: m}).Chat(own); err == nil {
			t.Fatalf("%+v on t1's template accepted", m)
		}
	}
	hf, err := moe.LoadTokenizer(qwen3Dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Model: ModelSettings{Tokenizer: qwen3Dir, ActionFormat: FormatToolCalls, Thinking: "off"}}
	c, err = cfg.Chat(hf)
	if err != nil {
		t.Fatal(err)
	}
	tp, ok := c.(*Template)
	if !ok || len(tp.Tools()) != 1 || tp.ObservationRole() != "tool" || *tp.opts.EnableThinking {
		t.Fatalf("chat %T %+v", c, c)
	}
	if again, _ := cfg.Chat(hf); again != c {
		t.Fatal("the model directory was loaded twice")
	}

	// The checkpoint's own files: the same rendering as the model directory's.
	cfg.Model.Tokenizer = ""
	c, err = cfg.Chat(hf)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "system", Content: ToolCallsSystemPrompt}, {Role: "user", Content: "List the files in /app."}}
	got, err := c.Render(msgs)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tp.Render(msgs)
	if err != nil || !slices.Equal(got, want) || c.Tokenizer() != hf || len(c.Tools()) != 1 {
		t.Fatalf("the checkpoint's template renders %d ids, the directory's %d (%v)", len(got), len(want), err)
	}
	bare, err := moe.ReadTokenizer(map[string][]byte{moe.TokenizerFile: mustRead(t, qwen3Dir+"/tokenizer.json")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Chat(bare); err == nil || !strings.Contains(err.Error(), moe.TokenizerConfigFile) {
		t.Fatalf("a Hugging Face tokenizer without its template: %v", err)
	}
}

// A model directory configured beside a policy must be the policy's own
// model: a checkpoint whose tokenizer files differ from the directory's
// (t1's own tokenizer, or Qwen3's tokenizer with another template) is
// refused when the episode's chat is built, naming the directory and the
// file; a checkpoint holding only tokenizer.json takes the directory's
// template, the purpose of the setting.
func TestConfigChatRefusesAnotherModelsTokenizer(t *testing.T) {
	t.Parallel()
	cfg := Config{Model: ModelSettings{Tokenizer: qwen3Dir, ActionFormat: FormatToolCalls}}
	tokJSON, tokCfg := mustRead(t, qwen3Dir+"/tokenizer.json"), mustRead(t, qwen3Dir+"/tokenizer_config.json")
	other := bytes.Replace(tokCfg, []byte("<|im_start|>assistant"), []byte("<|im_start|>model"), 1)
	if bytes.Equal(other, tokCfg) {
		t.Fatal("the fixture's template has no assistant header")
	}
	bare, err := moe.ReadTokenizer(map[string][]byte{moe.TokenizerFile: tokJSON})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Chat(bare); err != nil {
		t.Fatalf("a checkpoint with a bare tokenizer.json and the directory's template: %v", err)
	}
	mixed, err := moe.ReadTokenizer(map[string][]byte{moe.TokenizerFile: tokJSON, moe.TokenizerConfigFile: other})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		tok  tokenizer.Tokenizer
		want string
	}{
		"t1's own tokenizer":    {template(t).Tokenizer(), "disagree on tokenizer.json (the policy holds t1's own tokenizer"},
		"another chat template": {mixed, "disagree on tokenizer_config.json:"},
	} {
		_, err := cfg.Chat(tc.tok)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), qwen3Dir) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming %s and %q", name, err, qwen3Dir, tc.want)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
