package chattemplate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

type corpusCase struct {
	Name                string                     `json:"name"`
	Config              string                     `json:"config"`
	Messages            json.RawMessage            `json:"messages"`
	Tools               []json.RawMessage          `json:"tools"`
	EnableThinking      *bool                      `json:"enable_thinking"`
	AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
	Kwargs              map[string]json.RawMessage `json:"kwargs"`
	Template            string                     `json:"template"`
	Go                  string                     `json:"go"` // "refuses": Python renders it, the engine would not match
}

type corpus struct {
	Now   string       `json:"now"`
	Cases []corpusCase `json:"cases"`
}

func loadCorpus(t *testing.T) (corpus, time.Time) {
	t.Helper()
	data, err := os.ReadFile("testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var c corpus
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	now, err := time.Parse("2006-01-02T15:04:05", c.Now)
	if err != nil {
		t.Fatal(err)
	}
	return c, now
}

// options is what the generator passes to Python's render for this case.
func (c corpusCase) options(now time.Time, agp bool) Options {
	o := Options{AddGenerationPrompt: agp, EnableThinking: c.EnableThinking, Template: c.Template, Now: func() time.Time { return now }}
	if c.Tools != nil {
		o.Tools = []any{}
		for _, tool := range c.Tools {
			o.Tools = append(o.Tools, tool)
		}
	}
	if c.Kwargs != nil {
		o.Kwargs = map[string]any{}
		for k, v := range c.Kwargs {
			o.Kwargs[k] = v
		}
	}
	return o
}

func (c corpusCase) variants() []bool {
	if c.AddGenerationPrompt != nil {
		return []bool{*c.AddGenerationPrompt}
	}
	return []bool{false, true}
}

func stem(c corpusCase, agp bool) string {
	if agp {
		return c.Name + "+gen"
	}
	return c.Name
}

func readFile(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// Every case of the corpus renders byte for byte as Python's Jinja renders
// it in transformers' environment (testdata/gen-reference.py), or fails with
// the template's own raise_exception message where Python's does.
func TestReference(t *testing.T) {
	c, now := loadCorpus(t)
	templates := map[string]*Template{}
	compared := 0
	for _, cc := range c.Cases {
		tmpl := templates[cc.Config]
		if tmpl == nil {
			var err error
			if tmpl, err = Load(filepath.Join("testdata", cc.Config, "tokenizer_config.json")); err != nil {
				t.Fatal(err)
			}
			templates[cc.Config] = tmpl
		}
		msgs, err := ParseMessages(cc.Messages)
		if err != nil {
			t.Fatalf("%s: %v", cc.Name, err)
		}
		for _, agp := range cc.variants() {
			name := stem(cc, agp)
			t.Run(name, func(t *testing.T) {
				want, ok := readFile(t, filepath.Join("testdata", "reference", name+".txt"))
				raised, isRaise := readFile(t, filepath.Join("testdata", "reference", name+".raise.txt"))
				if !ok && !isRaise {
					t.Fatalf("no reference for %s: run testdata/gen-reference.py", name)
				}
				got, err := tmpl.Render(msgs, cc.options(now, agp))
				switch {
				case cc.Go == "refuses":
					if err == nil {
						t.Fatalf("rendered %q, want a refusal", got)
					}
					var re *RaiseError
					if errors.As(err, &re) {
						t.Fatalf("refused by the template (%v), want the engine check", err)
					}
					t.Logf("refused: %v", err)
				case isRaise:
					var re *RaiseError
					if !errors.As(err, &re) {
						t.Fatalf("got %q, %v; want the template to raise %q", got, err, raised)
					}
					if re.Message != raised {
						t.Fatalf("raised %q, want %q", re.Message, raised)
					}
				case err != nil:
					t.Fatal(err)
				case got != want:
					t.Fatalf("differs from the reference at byte %d\n got: %q\nwant: %q", firstDiff(got, want), got, want)
				}
				compared++
			})
		}
	}
	if compared < 60 {
		t.Fatalf("compared %d renderings; the corpus has more", compared)
	}
}

// The refusals are needed: without the check the engine's output differs
// from Python's for exactly those cases.
func TestRefusedCasesWouldDiffer(t *testing.T) {
	c, now := loadCorpus(t)
	n := 0
	for _, cc := range c.Cases {
		if cc.Go != "refuses" {
			continue
		}
		tmpl, err := Load(filepath.Join("testdata", cc.Config))
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := ParseMessages(cc.Messages)
		if err != nil {
			t.Fatal(err)
		}
		for _, agp := range cc.variants() {
			o := cc.options(now, agp)
			comp, err := tmpl.pick(o.Template, o.Tools != nil)
			if err != nil {
				t.Fatal(err)
			}
			data, err := tmpl.values(msgs, o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := comp.render(data)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := readFile(t, filepath.Join("testdata", "reference", stem(cc, agp)+".txt"))
			if got == want {
				t.Errorf("%s: the engine renders it as Python does; the refusal is not needed", cc.Name)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no refused cases in the corpus")
	}
}

// The corpus's messages reach the template as Python sees them: parsing and
// marshalling keeps every field, in order, with its value.
func TestMessagesRoundTrip(t *testing.T) {
	c, _ := loadCorpus(t)
	for _, cc := range c.Cases {
		msgs, err := ParseMessages(cc.Messages)
		if err != nil {
			t.Fatal(err)
		}
		got, err := toValue(msgs)
		if err != nil {
			t.Fatal(err)
		}
		want, err := decodeJSON(cc.Messages)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := ordered(got), ordered(want); g != w {
			t.Errorf("%s: the template would see\n%s\nnot\n%s", cc.Name, g, w)
		}
	}
}

// ordered writes a value with its key order and kinds visible.
func ordered(v jinja.Value) string {
	switch {
	case v.IsDict():
		var parts []string
		d := v.AsDict()
		for _, k := range d.Keys {
			parts = append(parts, strconv.Quote(k)+":"+ordered(d.Data[k]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case v.IsList():
		var parts []string
		for _, item := range v.AsList().Items {
			parts = append(parts, ordered(item))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case v.IsString():
		return strconv.Quote(v.AsString())
	case v.IsFloat():
		return "float(" + strconv.FormatFloat(v.AsFloat(), 'g', -1, 64) + ")"
	}
	return v.String()
}

func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// A config without chat_template is refused with a message that says so; a
// chat_template.jinja beside it is used instead, as transformers does.
func TestMissingTemplate(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenizer_config.json")
	if err := os.WriteFile(cfg, []byte(`{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(cfg)
	if err == nil || !strings.Contains(err.Error(), "has no chat_template") || !strings.Contains(err.Error(), "chat_template.jinja") {
		t.Fatalf("err = %v, want one naming the missing chat_template", err)
	}
	if _, err := Parse([]byte(`{"chat_template": null}`)); err == nil || !strings.Contains(err.Error(), "no chat_template") {
		t.Fatalf("Parse: err = %v", err)
	}

	qwen, err := os.ReadFile("testdata/qwen3/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	var fields struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(qwen, &fields); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte(fields.ChatTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpl, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{{Role: "system", Content: "You are a careful assistant."}, {Role: "user", Content: "What is 2+2?"}}, Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := readFile(t, "testdata/reference/system_user+gen.txt")
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A role no template knows is refused before rendering: Qwen3's template
// would drop such a turn without a word.
func TestUnknownRole(t *testing.T) {
	tmpl, err := Load("testdata/qwen3")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render([]Message{{Role: "user", Content: "a"}, {Role: "developer", Content: "b"}}, Options{})
	if err == nil || !strings.Contains(err.Error(), `message 1: role "developer" is not one of system, user, assistant, tool`) {
		t.Fatalf("err = %v", err)
	}
	_, err = ParseMessages([]byte(`[{"role": "observer", "content": "x"}]`))
	if err == nil || !strings.Contains(err.Error(), `role "observer"`) {
		t.Fatalf("ParseMessages: err = %v", err)
	}
}

// Bad messages are refused with what is wrong.
func TestBadMessages(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"role": "user"}`, "want a JSON array"},
		{`[{"role": "user"}]`, "role and content are required"},
		{`[{"role": "user", "content": null}]`, "content is null"},
		{`[{"role": "assistant", "content": "", "reasoning_content": null}]`, "reasoning_content is null: leave it out"},
		{`["hi"]`, "want an object"},
		{`[{"role": "user", "content": ["part"]}]`, "role and content are strings"},
		{`[{"role": "user", "content": "x", "images": []}]`, `unknown field "images"`},
		{`[{"role": "user", "content": "x", "reasoning_content": "r"}]`, "belong to assistant messages"},
		{`[{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "", "arguments": {}}}]}]`, "the function has no name"},
		{`[{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": [1]}}]}]`, "must be a JSON object or a JSON string"},
		{`[{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f"}}]}]`, "must be a JSON object or a JSON string"},
		{`[{"role": "assistant", "content": "", "tool_calls": [{"type": "code", "function": {"name": "f", "arguments": {}}}]}]`, `type "code"`},
	} {
		_, err := ParseMessages([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// Errors of the template itself name the template; the options that would
// shadow what Render sets are refused.
func TestTemplateErrors(t *testing.T) {
	if _, err := New("{% if %}", nil); err == nil || !strings.Contains(err.Error(), `chat template "default" does not compile`) {
		t.Fatalf("compile: err = %v", err)
	}
	tmpl, err := New(`{{ raise_exception("no " + messages[0].role + " here") }}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render([]Message{{Role: "user", Content: "x"}}, Options{})
	var re *RaiseError
	if !errors.As(err, &re) || re.Message != "no user here" || re.Template != "default" {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(err.Error(), `chat template "default" refused the conversation: no user here`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := tmpl.Render(nil, Options{Kwargs: map[string]any{"add_generation_prompt": true}}); err == nil || !strings.Contains(err.Error(), "Options.AddGenerationPrompt") {
		t.Fatalf("reserved kwarg: err = %v", err)
	}
	l, err := Load("testdata/llama3-style")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Render(nil, Options{Template: "chatml"}); err == nil || !strings.Contains(err.Error(), `no template named "chatml" (have default, tool_use)`) {
		t.Fatalf("unknown name: err = %v", err)
	}
	if _, err := New(`{{ strftime_now("%Q") }}`, nil); err != nil {
		t.Fatal(err)
	}
	bad, _ := New(`{{ strftime_now("%Q") }}`, nil)
	if _, err := bad.Render(nil, Options{}); err == nil || !strings.Contains(err.Error(), "%Q is not supported") {
		t.Fatalf("strftime: err = %v", err)
	}
}

// tojson arguments the engine does not honour are refused when the template
// is compiled; separators is honoured.
func TestTojsonArguments(t *testing.T) {
	for _, src := range []string{
		`{{ tools | tojson(indent=4) }}`,
		`{{ x|tojson( sort_keys=true) }}`,
		`{{ x | tojson(ensure_ascii=True) }}`,
		`{{ x | tojson(4) }}`,
	} {
		if _, err := New(src, nil); err == nil || !strings.Contains(err.Error(), "is not supported") {
			t.Errorf("%s: err = %v", src, err)
		}
	}
	tmpl, err := New(`{{ messages[0] | tojson(separators=(",", ":")) }}|{{ messages[0] | tojson() }}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{{Role: "user", Content: "a"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"role":"user","content":"a"}|{"role": "user", "content": "a"}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// Python's float repr, which json.dumps and str() print.
func TestPythonFloat(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 0: "0.0", 0.5: "0.5", -2.25: "-2.25", 1e-4: "0.0001", 1.5e-5: "1.5e-05",
		1e16: "1e+16", 1234567: "1234567.0", 9999999999999998: "9999999999999998.0", 0.1: "0.1", 2.5e20: "2.5e+20",
	} {
		if got := pythonFloat(f); got != want {
			t.Errorf("pythonFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

func TestStrftime(t *testing.T) {
	at := time.Date(2026, 3, 5, 21, 7, 2, 123456000, time.UTC)
	for format, want := range map[string]string{
		"%d %b %Y":                  "05 Mar 2026",
		"%-d %B %Y, %A %H:%M":       "5 March 2026, Thursday 21:07",
		"%I%p %a %j %y %m %S %f %%": "09PM Thu 064 26 03 02 123456 %",
		"%-I:%M%z%Z":                "9:07",
	} {
		got, err := strftime(at, format)
		if err != nil || got != want {
			t.Errorf("strftime(%q) = %q, %v; want %q", format, got, err, want)
		}
	}
}
