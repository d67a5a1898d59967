package verifier

import (
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// checkAssertions holds for every parser's output: bounded, valid UTF-8
// text, a known status, no duplicate names.
func checkAssertions(t *testing.T, as []Assertion) {
	seen := map[string]bool{}
	for _, a := range as {
		if len(a.Name) > MaxNameBytes || len(a.Message) > MaxMessageBytes || !utf8.ValidString(a.Name) || !utf8.ValidString(a.Message) {
			t.Fatalf("unbounded or invalid text: %q / %q", a.Name, a.Message)
		}
		switch a.Status {
		case Passed, Failed, Skipped, Error:
		default:
			t.Fatalf("status %q", a.Status)
		}
		if seen[a.Name] {
			t.Fatalf("duplicate %q", a.Name)
		}
		seen[a.Name] = true
	}
}

func seeds(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzParseCTRF(f *testing.F) {
	seeds(f, "ctrf-word-freq.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		as, err := ParseCTRF(data)
		if err == nil {
			checkAssertions(t, as)
		}
	})
}

func FuzzParseJUnit(f *testing.F) {
	seeds(f, "junit-mixed.xml", "junit-word-freq.xml")
	f.Fuzz(func(t *testing.T, data []byte) {
		as, err := ParseJUnit(data)
		if err == nil {
			checkAssertions(t, as)
		}
	})
}

func FuzzParseRewardJSON(f *testing.F) {
	f.Add([]byte(`{"reward": 1.0}`))
	f.Add([]byte(`{"reward": 0.5, "accuracy": 0.8}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, all, err := ParseRewardJSON(data)
		if err == nil {
			if len(all) == 0 || v != v {
				t.Fatalf("%v %v", v, all)
			}
		}
	})
}

func FuzzParseRewardTxt(f *testing.F) {
	f.Add([]byte("1\n"))
	f.Add([]byte("0.25"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if v, err := ParseRewardTxt(data); err == nil && v != v {
			t.Fatal("NaN accepted")
		}
	})
}

// FuzzBuild: whatever the files hold, there is a result and the counts add
// up.
func FuzzBuild(f *testing.F) {
	f.Add([]byte(`{"results":{"tests":[{"name":"a","status":"passed"}]}}`), []byte(`<testsuite><testcase name="a"/></testsuite>`), []byte(`{"reward":1}`), []byte("1"), 0)
	f.Fuzz(func(t *testing.T, ctrf, junit, rj, rt []byte, exit int) {
		files := Files{}
		for name, b := range map[string][]byte{CTRFFile: ctrf, JUnitFile: junit, RewardJSONFile: rj, RewardTxtFile: rt} {
			if len(b) > 0 {
				files[name] = b
			}
		}
		r := Build(files, exit)
		if r.Source == "" || r.Passed+r.Failed+r.Skipped+r.Errors != r.Total || r.Total != len(r.Assertions) || r.Fallback != (r.Total == 0) {
			t.Fatalf("%+v", r)
		}
		checkAssertions(t, r.Assertions)
		for _, p := range r.Problems {
			if !utf8.ValidString(p) {
				t.Fatalf("problem %q", p)
			}
		}
	})
}

func FuzzNetworkInstalls(f *testing.F) {
	seeds(f, "../../testdata/tasks/word-freq/tests/test.sh", "../../testdata/tasks/log-rotate/tests/test.sh")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, u := range NetworkInstalls(data) {
			if u.Line < 1 || len(u.Text) > 200 {
				t.Fatalf("%+v", u)
			}
		}
	})
}
