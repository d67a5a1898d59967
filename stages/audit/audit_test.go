package audit

import (
	"slices"
	"strings"
	"testing"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
)

const (
	goodInstruction = "Count the lines of `/app/data/app.log` that contain `ERROR` and write the number alone to `/app/out/error_count.txt`. Then write every line containing `WARN` to `/app/out/warn_lines.txt`.\n"
	goodSolution    = "#!/bin/bash\nset -euo pipefail\nmkdir -p /app/out\ngrep -c ERROR /app/data/app.log > /app/out/error_count.txt\ngrep WARN /app/data/app.log > /app/out/warn_lines.txt\n"
	goodTests       = `from pathlib import Path


def test_count():
    assert Path("/app/out/error_count.txt").read_text().strip() == "3"


def test_warn_lines():
    assert Path("/app/out/warn_lines.txt").read_text() == "2026-03-01 WARN cache: disk usage high\n"
`
	// The log travels base64-encoded, as synthesised environments carry
	// their files, so its lines are not public text.
	setup = "#!/bin/bash\nmkdir -p /app/data\necho YSBFUlJPUgpiIEVSUk9SCmMgRVJST1IKMjAyNi0wMy0wMSBXQVJOIGNhY2hlOiBkaXNrIHVzYWdlIGhpZ2gK | base64 -d > /app/data/app.log\n"
)

type variant struct {
	instruction, solution, tests, envExtra string
}

func task(t *testing.T, v variant) *harbor.Task {
	t.Helper()
	if v.instruction == "" {
		v.instruction = goodInstruction
	}
	if v.solution == "" {
		v.solution = goodSolution
	}
	if v.tests == "" {
		v.tests = goodTests
	}
	b := harbor.NewBuilder("log-task").
		Instruction(v.instruction).
		Metadata(harbor.Metadata{Difficulty: "easy", Category: "text-processing"}).
		SetupScript(setup).
		Solution(v.solution).
		TestScript("#!/bin/bash\npython3 -m pytest --junitxml=/logs/verifier/junit.xml /tests/test_outputs.py\n").
		TestFile("test_outputs.py", []byte(v.tests))
	if v.envExtra != "" {
		b = b.EnvironmentFile("notes.txt", []byte(v.envExtra), 0o644)
	}
	tk, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func report(statuses ...verifier.Status) *verifier.Report {
	r := &verifier.Report{Source: verifier.SourceJUnit}
	for i, s := range statuses {
		r.Assertions = append(r.Assertions, verifier.Assertion{Name: []string{"test_count", "test_warn_lines"}[i], Status: s})
		r.Total++
		if s == verifier.Passed {
			r.Passed++
		} else {
			r.Failed++
		}
	}
	r.Solved = r.Passed == r.Total && r.Total > 0
	return r
}

var (
	pass2 = func() *verifier.Report { return report(verifier.Passed, verifier.Passed) }
	fail2 = func() *verifier.Report { return report(verifier.Failed, verifier.Failed) }
)

func goodEvidence(t *testing.T) Evidence {
	return Evidence{
		Task:   task(t, variant{}),
		Oracle: Run{Report: pass2()},
		Rerun:  &Run{Report: pass2()},
		Null:   Run{SolutionExit: -1, Report: fail2()},
	}
}

func TestAuditAcceptsAGoodTask(t *testing.T) {
	v := Audit(goodEvidence(t), DefaultSettings())
	if !v.Accept {
		t.Fatalf("rejected: %v\n%s", v.Rejects, strings.Join(v.Findings, "\n"))
	}
	s := v.Scores
	for name, x := range map[string]float64{"correctness": s.VerifierCorrectness, "strength": s.VerifierStrength,
		"validity": s.SolutionValidity, "integrity": s.SolutionIntegrity, "completeness": s.InstructionCompleteness,
		"clarity": s.InstructionClarity, "novelty": s.ValueNovelty} {
		if x != 1 {
			t.Errorf("%s = %v, want 1 (%v)", name, x, v.Findings)
		}
	}
	want := round(WeightVerifier + WeightSolution + WeightInstruction + WeightValue*(s.ValueDifficulty+1)/2)
	if v.Total != want {
		t.Fatalf("total %v, want %v", v.Total, want)
	}
}

func TestAuditRejects(t *testing.T) {
	cases := map[string]struct {
		edit func(ev *Evidence)
		want string
	}{
		"hidden requirement": {func(ev *Evidence) {
			ev.Task = task(t, variant{tests: goodTests + "\n\ndef test_summary():\n    assert Path(\"/app/out/summary.json\").exists()\n"})
		}, HiddenRequirement},
		"similar name is not a name": {func(ev *Evidence) {
			ev.Task = task(t, variant{tests: strings.ReplaceAll(goodTests, "/app/out/error_count.txt", "/app/out/error_count.txt.bak")})
		}, HiddenRequirement},
		"test leakage in the environment": {func(ev *Evidence) {
			ev.Task = task(t, variant{envExtra: "hints:\n" + goodTests})
		}, TestLeakage},
		"test leakage in the instruction": {func(ev *Evidence) {
			ev.Task = task(t, variant{instruction: goodInstruction + "Run /tests/test_outputs.py to check.\n"})
		}, TestLeakage},
		"solution reads the tests": {func(ev *Evidence) {
			ev.Task = task(t, variant{solution: goodSolution + "cat /tests/test_outputs.py >/dev/null\n"})
		}, SolutionGaming},
		"solution hard-codes the expected output": {func(ev *Evidence) {
			ev.Task = task(t, variant{solution: "#!/bin/bash\nmkdir -p /app/out\necho 3 > /app/out/error_count.txt\necho '2026-03-01 WARN cache: disk usage high' > /app/out/warn_lines.txt\n"})
		}, SolutionGaming},
		"verifier passes the untouched environment": {func(ev *Evidence) {
			ev.Null.Report = pass2()
		}, VerifierTooWeak},
		"most assertions pass without a solution": {func(ev *Evidence) {
			ev.Null.Report = report(verifier.Passed, verifier.Failed)
			ev.Null.Report.Assertions = append(ev.Null.Report.Assertions, verifier.Assertion{Name: "x", Status: verifier.Passed}, verifier.Assertion{Name: "y", Status: verifier.Passed})
			ev.Null.Report.Passed, ev.Null.Report.Total = 3, 4
		}, VerifierTooWeak},
		"oracle fails": {func(ev *Evidence) {
			ev.Oracle.Report = report(verifier.Passed, verifier.Failed)
		}, OracleFails},
		"no verifier result": {func(ev *Evidence) {
			ev.Oracle.Report = nil
		}, OracleFails},
		"near duplicate of a reference": {func(ev *Evidence) {
			ev.References = []harbor.Reference{{Name: "eval-upper", Print: harbor.FingerprintOf(task(t, variant{instruction: strings.ToUpper(goodInstruction)}))}}
		}, NearDuplicate},
		"low score": {func(ev *Evidence) {
			ev.Oracle.SolutionTimedOut = true
			ev.Rerun = nil
			ev.Task = task(t, variant{instruction: "Fix `/app/out/error_count.txt` and `/app/out/warn_lines.txt`"})
			ev.Null.Report = report(verifier.Passed, verifier.Failed)
		}, LowScore},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ev := goodEvidence(t)
			c.edit(&ev)
			cfg := DefaultSettings()
			if c.want == LowScore {
				cfg.Threshold = 0.8
			}
			v := Audit(ev, cfg)
			if v.Accept || !slices.Contains(v.Rejects, c.want) {
				t.Fatalf("rejects %v, want %s\nfindings: %v", v.Rejects, c.want, v.Findings)
			}
			if len(v.Findings) == 0 {
				t.Fatal("a reject without a finding")
			}
			if c.want == NearDuplicate && v.NearDuplicateOf != "eval-upper" {
				t.Fatalf("near duplicate of %q, want the reference's name", v.NearDuplicateOf)
			}
		})
	}
}

func TestAuditNondeterministicTaskLosesValidity(t *testing.T) {
	ev := goodEvidence(t)
	ev.Rerun = &Run{Report: report(verifier.Passed, verifier.Failed)}
	v := Audit(ev, DefaultSettings())
	if v.Scores.SolutionValidity != 0.5 {
		t.Fatalf("validity %v, want 0.5", v.Scores.SolutionValidity)
	}
}

// Equal evidence gives an equal verdict, whatever the map order inside.
func TestAuditDeterministic(t *testing.T) {
	ev := goodEvidence(t)
	ev.Task = task(t, variant{tests: goodTests + "\n\ndef test_a():\n    assert Path(\"/app/zz/a\").exists()\n\n\ndef test_b():\n    assert Path(\"/app/yy/b\").exists()\n"})
	first := Audit(ev, DefaultSettings())
	for range 20 {
		if v := Audit(ev, DefaultSettings()); !slices.Equal(v.Findings, first.Findings) || v.Total != first.Total {
			t.Fatalf("verdicts differ:\n%v\n%v", first.Findings, v.Findings)
		}
	}
}

func TestDedupKeepsTheFirstOfNearDuplicates(t *testing.T) {
	a := harbor.FingerprintText("sort the csv file /app/data/sales.csv by units and write it to /app/out/sorted.csv")
	b := harbor.FingerprintText("Sort the CSV file /app/data/sales.csv by units, and write it to /app/out/sorted.csv!")
	c := harbor.FingerprintText("create a git repository at /app/repos/docs and commit the notes directory")
	if got := harbor.Dedup([]harbor.Fingerprint{a, b, c}, 0.8); !slices.Equal(got, []bool{true, false, true}) {
		t.Fatalf("keep %v", got)
	}
	if s := harbor.Similarity(a, c); s > 0.2 {
		t.Fatalf("unrelated tasks have similarity %v", s)
	}
}
