package verifier

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseJUnitFromPytest(t *testing.T) {
	// Written by pytest 7.2 --junitxml (xunit2) for testdata's test_mixed.py.
	got, err := ParseJUnit(read(t, "junit-mixed.xml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Assertion{
		{"test_mixed::test_pass", Passed, ""},
		{"test_mixed::test_fail", Failed, "AssertionError: accented text differs\nassert 'café' == 'cafe'\n  - cafe\n  ?    ^\n  + café\n  ?    ^"},
		{"test_mixed::test_skip", Skipped, "not on this platform"},
		{"test_mixed::test_xfail", Skipped, "known bug"},
		{"test_mixed::test_setup_error", Error, `failed on setup with "RuntimeError: fixture exploded"`},
		// The teardown error pytest adds as a second <testcase> folds in.
		{"test_mixed::test_fail_and_teardown_error", Failed, "AssertionError: failed before teardown\nassert 0"},
		{"test_mixed.TestGroup::test_method", Passed, ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%#v\nwant\n%#v", got, want)
	}
}

func TestParseJUnitShapes(t *testing.T) {
	cases := map[string]struct {
		xml  string
		want []Assertion
		err  string
	}{
		"bare testsuite": {xml: `<testsuite><testcase name="a"/><testcase classname="c" name="b"><failure>boom
second</failure></testcase></testsuite>`,
			want: []Assertion{{"a", Passed, ""}, {"c::b", Failed, "boom"}}},
		"nested suites": {xml: `<testsuites><testsuite><testsuite><testcase name="deep"><skipped/></testcase></testsuite></testsuite></testsuites>`,
			want: []Assertion{{"deep", Skipped, ""}}},
		"latin1": {xml: "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><testsuite><testcase name=\"caf\xe9\"/></testsuite>",
			want: []Assertion{{"café", Passed, ""}}},
		"empty suite": {xml: `<testsuites><testsuite tests="0"/></testsuites>`, want: nil},
		"wrong root":  {xml: `<html><testcase name="x"/></html>`, err: "root element is <html>"},
		"not xml":     {xml: `{"results": {}}`, err: "no <testsuites>"},
		"truncated":   {xml: `<testsuites><testsuite><testcase name="x">`, err: "not JUnit XML"},
		"entity":      {xml: `<!DOCTYPE x [<!ENTITY a "aaaa">]><testsuite><testcase name="&a;"/></testsuite>`, err: "not JUnit XML"},
		"nested case": {xml: `<testsuite><testcase name="a"><testcase name="b"/></testcase></testsuite>`, err: "inside <testcase>"},
		"bad charset": {xml: `<?xml version="1.0" encoding="EBCDIC"?><testsuite/>`, err: "unsupported encoding"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseJUnit([]byte(c.xml))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v want %#v", got, c.want)
			}
		})
	}
}

func TestParseCTRF(t *testing.T) {
	got, err := ParseCTRF(read(t, "ctrf-word-freq.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Assertion{
		{"test_outputs.py::test_output_exists", Passed, ""},
		{"test_outputs.py::test_five_lines", Passed, ""},
		{"test_outputs.py::test_line_format", Passed, ""},
		{"test_outputs.py::test_counts_and_order", Failed, "AssertionError: assert ['the 7', 'fo...4', 'quick 2'] == ['the 7', 'fo...4', 'quick 3']"},
		{"test_outputs.py::test_corpus_untouched", Error, "RuntimeError: fixture exploded"},
		{"test_outputs.py::test_optional", Skipped, "not on this platform"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%#v\nwant\n%#v", got, want)
	}
	bad := map[string]string{
		`[]`:                                   "not CTRF JSON",
		`{}`:                                   `no "results" object`,
		`{"results": {"tool": {"name": "x"}}}`: `no "results.tests" array`,
		`{"results": {"tests": [{"name": 3, "status": "passed"}]}}`: "results.tests[0].name: want a string",
		`{"results": {"tests": [{"name": "a"}]}}`:                   "results.tests[0] (a): no status",
		`{"results": {"tests": []}} trailing`:                       "not CTRF JSON",
	}
	for in, want := range bad {
		if _, err := ParseCTRF([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCTRF(%s): %v, want %q", in, err, want)
		}
	}
	as, err := ParseCTRF([]byte(`{"results": {"tests": [{"name": "a", "status": "pending"}, {"name": "", "status": "flaky"}]}}`))
	if err != nil || as[0].Status != Skipped || as[1].Status != Error || as[1].Name != "test #2" || !strings.Contains(as[1].Message, "unknown CTRF status flaky") {
		t.Fatalf("%#v %v", as, err)
	}
}

func TestRewardFiles(t *testing.T) {
	for in, want := range map[string]float64{"1": 1, "0\n": 0, " 0.75 \n": 0.75, "1.0": 1, "-1": -1} {
		if got, err := ParseRewardTxt([]byte(in)); err != nil || got != want {
			t.Errorf("ParseRewardTxt(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "yes", "NaN", "inf", "1 2", strings.Repeat("1", 100)} {
		if _, err := ParseRewardTxt([]byte(in)); err == nil {
			t.Errorf("ParseRewardTxt(%q) accepted", in)
		}
	}
	v, all, err := ParseRewardJSON([]byte(`{"reward": 0.5, "accuracy": 0.8}`))
	if err != nil || v != 0.5 || all["accuracy"] != 0.8 {
		t.Fatal(v, all, err)
	}
	if v, _, err := ParseRewardJSON([]byte(`{"score": 3}`)); err != nil || v != 3 {
		t.Fatal(v, err)
	}
	for in, want := range map[string]string{
		`{"a": 1, "b": 2}`:  `no "reward" key among 2 metrics`,
		`{"reward": "1"}`:   `"reward": want a number`,
		`{}`:                "no metrics",
		`null`:              "got null",
		`[1]`:               "want a JSON object",
		`{"reward": 1e999}`: "want a number",
		`{"reward": true}`:  "want a number",
		"{\"reward\": 1}x":  "want a JSON object",
	} {
		if _, _, err := ParseRewardJSON([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRewardJSON(%s): %v, want %q", in, err, want)
		}
	}
}

func TestBuildPrecedence(t *testing.T) {
	ctrf, junit := read(t, "ctrf-word-freq.json"), read(t, "junit-word-freq.xml")
	one, half := 1.0, 0.5
	cases := []struct {
		name     string
		files    Files
		exit     int
		source   Source
		passed   int
		total    int
		solved   bool
		fallback bool
		reward   *float64
		problems []string
	}{
		{"ctrf wins", Files{CTRFFile: ctrf, JUnitFile: junit, RewardTxtFile: []byte("0\n")}, 1, SourceCTRF, 3, 6, false, false, new(float64), nil},
		{"junit when no ctrf", Files{JUnitFile: junit, RewardTxtFile: []byte("0")}, 0, SourceJUnit, 4, 5, false, false, new(float64), nil},
		{"malformed ctrf falls to junit", Files{CTRFFile: []byte(`{"results":`), JUnitFile: junit}, 1, SourceJUnit, 4, 5, false, false, nil, []string{"ctrf.json: not CTRF JSON"}},
		{"empty ctrf falls through", Files{CTRFFile: []byte(`{"results": {"tests": []}}`), RewardJSONFile: []byte(`{"reward": 1}`)}, 1, SourceRewardJSON, 0, 0, true, true, &one, []string{"ctrf.json: no tests reported"}},
		{"reward.json before reward.txt", Files{RewardJSONFile: []byte(`{"reward": 0.5}`), RewardTxtFile: []byte("1")}, 0, SourceRewardJSON, 0, 0, false, true, &half, []string{"reward.json says 0.5, reward.txt says 1"}},
		{"bad reward.json falls to reward.txt", Files{RewardJSONFile: []byte(`{"reward": "yes"}`), RewardTxtFile: []byte("1")}, 1, SourceRewardTxt, 0, 0, true, true, &one, []string{"reward.json:"}},
		{"exit code alone, success", Files{}, 0, SourceExitCode, 0, 0, true, true, nil, nil},
		{"exit code alone, failure", Files{}, 2, SourceExitCode, 0, 0, false, true, nil, nil},
		{"everything malformed", Files{CTRFFile: []byte("x"), JUnitFile: []byte("<a/>"), RewardJSONFile: []byte("{"), RewardTxtFile: []byte("?")}, 0, SourceExitCode, 0, 0, true, true, nil,
			[]string{"ctrf.json", "junit.xml", "reward.json", "reward.txt"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Build(c.files, c.exit)
			if r.Source != c.source || r.Passed != c.passed || r.Total != c.total || r.Solved != c.solved || r.Fallback != c.fallback || r.ExitCode != c.exit {
				t.Fatalf("report %+v", r)
			}
			if (r.Reward == nil) != (c.reward == nil) || (r.Reward != nil && *r.Reward != *c.reward) {
				t.Fatalf("reward %v, want %v", r.Reward, c.reward)
			}
			if len(r.Problems) != len(c.problems) {
				t.Fatalf("problems %q, want %d", r.Problems, len(c.problems))
			}
			for i, p := range c.problems {
				if !strings.Contains(r.Problems[i], p) {
					t.Fatalf("problem %q does not mention %q", r.Problems[i], p)
				}
			}
		})
	}
}

func TestParseDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, JUnitFile), read(t, "junit-word-freq.xml"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Neither a directory nor an oversize file is read.
	if err := os.Mkdir(filepath.Join(dir, CTRFFile), 0o755); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create(filepath.Join(dir, RewardJSONFile))
	f.Truncate(MaxFileBytes + 1)
	f.Close()
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, RewardTxtFile)); err != nil {
		t.Fatal(err)
	}
	r := Parse(dir, 1)
	if r.Source != SourceJUnit || r.Passed != 4 || r.Total != 5 || len(r.Problems) != 3 {
		t.Fatalf("%+v", r)
	}
	for i, want := range []string{"ctrf.json: not a regular file", "reward.json: 16777217 bytes", "reward.txt: not a regular file"} {
		if !strings.HasPrefix(r.Problems[i], want) {
			t.Fatalf("problem %d %q, want %q", i, r.Problems[i], want)
		}
	}
	if r := Parse(filepath.Join(dir, "absent"), 0); r.Source != SourceExitCode || !r.Solved || len(r.Problems) != 0 {
		t.Fatalf("%+v", r)
	}
}

// The log directory itself may be a link the verifier's sandbox planted
// (a download copies links as links): it is never followed, so neither a
// host file's reward nor its text reaches the report.
func TestParseDirNeverFollowsLinkedDirectory(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, RewardJSONFile), []byte(`{"reward": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, RewardTxtFile), []byte("host-secret-7e21\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(t.TempDir(), "v")
	if err := os.Symlink(host, logs); err != nil {
		t.Fatal(err)
	}
	r := Parse(logs, 1)
	if r.Reward != nil || r.Solved || r.Source != SourceExitCode {
		t.Errorf("a linked log directory was read: %+v", r)
	}
	if len(r.Problems) == 0 || !strings.Contains(r.Problems[0], "link") {
		t.Errorf("problems %q, want one saying the directory is a link", r.Problems)
	}
	for _, p := range r.Problems {
		if strings.Contains(p, "host-secret") {
			t.Errorf("the report echoes a host file: %q", p)
		}
	}
}

func TestBound(t *testing.T) {
	long := strings.Repeat("é", MaxMessageBytes)
	b := bound(long, MaxMessageBytes)
	if len(b) > MaxMessageBytes || !utf8.ValidString(b) || !strings.HasSuffix(b, "…") {
		t.Fatalf("%d bytes, valid %v", len(b), utf8.ValidString(b))
	}
	if got := bound("a\xffb\x00c", 100); got != "a\uFFFDbc" {
		t.Fatalf("%q", got)
	}
	as, err := ParseCTRF([]byte(`{"results": {"tests": [{"name": "` + strings.Repeat("n", 5000) + `", "status": "failed", "message": "` + strings.Repeat("m", 50000) + `"}]}}`))
	if err != nil || len(as[0].Name) > MaxNameBytes || len(as[0].Message) > MaxMessageBytes {
		t.Fatalf("%v %d %d", err, len(as[0].Name), len(as[0].Message))
	}
}

func TestRewardFunc(t *testing.T) {
	perAssertion := Build(Files{JUnitFile: read(t, "junit-mixed.xml")}, 1) // 2 passed, 2 skipped, 1 error, 2 failed
	solved := &Report{Source: SourceJUnit, Passed: 3, Skipped: 1, Total: 4, Solved: true}
	fbSolved := Build(Files{RewardTxtFile: []byte("1")}, 0)
	fbFailed := Build(Files{}, 3)
	cases := []struct {
		mode   Mode
		r      *Report
		want   float64
		solved bool
	}{
		{ModeCount, perAssertion, 2 * 0.5, false},
		{ModeFraction, perAssertion, 2.0 / 5 * 0.5, false},
		{ModeBinary, perAssertion, 0, false},
		{ModeCount, solved, 3 * 0.5, true},
		{ModeFraction, solved, 0.5, true},
		{ModeBinary, solved, 0.5, true},
		{ModeCount, fbSolved, 0.5, true},
		{ModeFraction, fbSolved, 0.5, true},
		{ModeCount, fbFailed, 0, false},
	}
	for _, c := range cases {
		f, err := NewRewardFunc(c.mode, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		s := f.Score(c.r)
		if math.Abs(s.Value-c.want) > 1e-12 || s.Solved != c.solved || s.Fallback != c.r.Fallback || s.Mode != c.mode {
			t.Errorf("%s on %s: %+v, want %v", c.mode, c.r.Source, s, c.want)
		}
		if s.Solved && s.Value == 0 {
			t.Errorf("%s: a solved task scored zero", c.mode)
		}
	}
	for _, bad := range []struct {
		m Mode
		s float64
	}{{"sum", 1}, {ModeCount, 0}, {ModeCount, -1}, {ModeCount, math.Inf(1)}, {ModeCount, math.NaN()}} {
		if _, err := NewRewardFunc(bad.m, bad.s); err == nil {
			t.Errorf("NewRewardFunc(%q, %v) accepted", bad.m, bad.s)
		}
	}
}

// A test.sh that fails before writing a result keeps the end of its output
// and says why there is none; one that wrote a result, or exited 0, keeps
// nothing.
func TestExplain(t *testing.T) {
	r := Build(Files{}, 127)
	r.Explain("Reading package lists...\n/tests/test.sh: line 9: /app/build.sh: No such file or directory\n")
	if len(r.Problems) != 1 || r.Problems[0] != "test.sh exited 127 without writing results (CTRF, JUnit or a reward file); its output ends: /tests/test.sh: line 9: /app/build.sh: No such file or directory" ||
		!strings.HasSuffix(r.Output, "No such file or directory\n") {
		t.Errorf("problems %q, output %q", r.Problems, r.Output)
	}
	long := strings.Repeat("é", MaxOutputBytes) + "\nlast\n"
	r = Build(Files{}, 1)
	r.Explain(long)
	if len(r.Output) > MaxOutputBytes || !strings.HasPrefix(r.Output, "…") || !strings.HasSuffix(r.Output, "last\n") || !utf8.ValidString(r.Output) {
		t.Errorf("long output kept as %d bytes: %q…", len(r.Output), r.Output[:16])
	}
	r = Build(Files{}, 1)
	r.Explain("")
	if len(r.Problems) != 1 || !strings.HasSuffix(r.Problems[0], "; no output") {
		t.Errorf("no output: %q", r.Problems)
	}
	for name, r := range map[string]*Report{
		"exit 0":     Build(Files{}, 0),
		"reward.txt": Build(Files{RewardTxtFile: []byte("0\n")}, 1),
		"junit":      Build(Files{JUnitFile: []byte(`<testsuite><testcase classname="t" name="a"><failure message="x"/></testcase></testsuite>`)}, 1),
	} {
		r.Explain("output\n")
		if r.Output != "" || slices.ContainsFunc(r.Problems, func(p string) bool { return strings.HasPrefix(p, "test.sh exited") }) {
			t.Errorf("%s: output %q, problems %q", name, r.Output, r.Problems)
		}
	}
}
