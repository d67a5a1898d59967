package audit

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
)

// Facet weights (ARCHITECTURE.md §1.2); they sum to 1.
const (
	WeightVerifier    = 0.45
	WeightSolution    = 0.25
	WeightInstruction = 0.20
	WeightValue       = 0.10
)

// Reject reasons.
const (
	HiddenRequirement = "hidden_requirement"
	TestLeakage       = "test_leakage"
	SolutionGaming    = "solution_gaming"
	VerifierTooWeak   = "verifier_too_weak"
	OracleFails       = "oracle_fails"
	LowScore          = "low_score"
	NearDuplicate     = "near_duplicate"
)

// Run is one execution of a task in a fresh sandbox.
type Run struct {
	// SolutionExit is solve.sh's exit status; -1 when it was killed.
	SolutionExit     int
	SolutionTimedOut bool
	// Report is what the verifier left; nil when it could not run.
	Report *verifier.Report
}

// Evidence is everything Audit judges.
type Evidence struct {
	Task *harbor.Task
	// Oracle: environment, reference solution, verifier.
	Oracle Run
	// Rerun repeats Oracle in a second sandbox; nil skips the check.
	Rerun *Run
	// Null: environment, then the verifier, with no solution.
	Null Run
	// References are the tasks the pool must stay apart from (the
	// evaluation suites).
	References []harbor.Reference
}

// Scores holds the eight dimensions, each in [0, 1].
type Scores struct {
	VerifierCorrectness     float64 `json:"verifier_correctness"`
	VerifierStrength        float64 `json:"verifier_strength"`
	SolutionValidity        float64 `json:"solution_validity"`
	SolutionIntegrity       float64 `json:"solution_integrity"`
	InstructionCompleteness float64 `json:"instruction_completeness"`
	InstructionClarity      float64 `json:"instruction_clarity"`
	ValueDifficulty         float64 `json:"value_difficulty"`
	ValueNovelty            float64 `json:"value_novelty"`
}

// Facets are the dimensions folded in pairs.
type Facets struct {
	Verifier    float64 `json:"verifier"`
	Solution    float64 `json:"solution"`
	Instruction float64 `json:"instruction"`
	Value       float64 `json:"value"`
}

// Verdict is the audit's decision on one task.
type Verdict struct {
	Scores  Scores   `json:"scores"`
	Facets  Facets   `json:"facets"`
	Total   float64  `json:"total"`
	Accept  bool     `json:"accept"`
	Rejects []string `json:"rejects,omitempty"`
	// Findings explain every score below 1 and every reject.
	Findings []string `json:"findings,omitempty"`
	// NearDuplicateOf names the reference a near-duplicate reject is
	// about: the most similar one.
	NearDuplicateOf string `json:"near_duplicate_of,omitempty"`
}

type judge struct {
	v Verdict
}

func (j *judge) reject(reason, format string, args ...any) {
	if !slices.Contains(j.v.Rejects, reason) {
		j.v.Rejects = append(j.v.Rejects, reason)
	}
	j.note(reason+": "+format, args...)
}

func (j *judge) note(format string, args ...any) {
	j.v.Findings = append(j.v.Findings, fmt.Sprintf(format, args...))
}

// Audit judges ev. It never fails: missing evidence scores zero on the
// dimensions that need it.
func Audit(ev Evidence, cfg Settings) Verdict {
	j := &judge{}
	s := &j.v.Scores
	t := ev.Task
	tests := testSources(t)

	s.VerifierCorrectness, s.VerifierStrength = j.verifier(ev)
	s.SolutionValidity = j.validity(ev)
	s.SolutionIntegrity = j.integrity(t, tests)
	s.InstructionCompleteness = j.completeness(t, tests)
	s.InstructionClarity = j.clarity(t, tests)
	s.ValueDifficulty = difficulty(t, ev.Oracle.Report)
	s.ValueNovelty = j.novelty(t, ev.References, cfg)

	f := &j.v.Facets
	f.Verifier = (s.VerifierCorrectness + s.VerifierStrength) / 2
	f.Solution = (s.SolutionValidity + s.SolutionIntegrity) / 2
	f.Instruction = (s.InstructionCompleteness + s.InstructionClarity) / 2
	f.Value = (s.ValueDifficulty + s.ValueNovelty) / 2
	j.v.Total = round(WeightVerifier*f.Verifier + WeightSolution*f.Solution + WeightInstruction*f.Instruction + WeightValue*f.Value)
	if len(j.v.Rejects) == 0 && j.v.Total < cfg.Threshold {
		j.reject(LowScore, "weighted total %.3f is below %.3f", j.v.Total, cfg.Threshold)
	}
	j.v.Accept = len(j.v.Rejects) == 0
	return j.v
}

// round keeps totals stable in text and across platforms' last bits.
func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }

func (j *judge) verifier(ev Evidence) (correct, strength float64) {
	o := ev.Oracle.Report
	switch {
	case o == nil:
		j.reject(OracleFails, "the verifier left no result after the reference solution")
	case !o.Solved:
		j.reject(OracleFails, "the reference solution passes %d of %d assertions (report from %s)", o.Passed, o.Total, o.Source)
	}
	if o != nil {
		correct = 1
		if o.Total > 0 {
			correct = float64(o.Passed) / float64(o.Total)
		} else if !o.Solved {
			correct = 0
		}
	}
	n := ev.Null.Report
	if n == nil {
		j.note("verifier strength: no result from the run without a solution")
		return correct, 0
	}
	if n.Solved {
		j.reject(VerifierTooWeak, "the verifier passes the untouched environment")
		return correct, 0
	}
	if n.Total == 0 {
		return correct, 1 // a binary verifier that failed the untouched environment
	}
	// Assertions can only fail on the null run if the oracle run holds
	// them too; count those the null run passes.
	strength = 1 - float64(n.Passed)/float64(n.Total)
	if strength < 0.5 {
		j.reject(VerifierTooWeak, "%d of %d assertions pass without any solution", n.Passed, n.Total)
	} else if n.Passed > 0 {
		j.note("verifier strength: %d of %d assertions pass without any solution", n.Passed, n.Total)
	}
	return correct, strength
}

func (j *judge) validity(ev Evidence) float64 {
	o := ev.Oracle
	if o.SolutionTimedOut {
		j.note("solution validity: the reference solution timed out")
		return 0
	}
	if o.SolutionExit != 0 {
		j.note("solution validity: the reference solution exited %d", o.SolutionExit)
		return 0.25
	}
	if ev.Rerun != nil && !sameResults(o.Report, ev.Rerun.Report) {
		j.note("solution validity: a second sandbox gave different assertion results (nondeterministic task)")
		return 0.5
	}
	return 1
}

func sameResults(a, b *verifier.Report) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Solved != b.Solved || len(a.Assertions) != len(b.Assertions) {
		return false
	}
	for i := range a.Assertions {
		if a.Assertions[i].Name != b.Assertions[i].Name || a.Assertions[i].Status != b.Assertions[i].Status {
			return false
		}
	}
	return true
}

// verifierMarks are things only the verifier should touch.
var verifierMarks = []string{"/tests", "/logs/verifier", "test_outputs", "reward.txt", "reward.json", "junit", "ctrf", "pytest"}

func (j *judge) integrity(t *harbor.Task, tests map[string]string) float64 {
	sol := string(t.Files[harbor.SolutionPath].Data)
	for p, f := range t.Files {
		if strings.HasPrefix(p, "solution/") && p != harbor.SolutionPath {
			sol += "\n" + string(f.Data)
		}
	}
	score := 1.0
	for _, m := range verifierMarks {
		if strings.Contains(sol, m) {
			j.reject(SolutionGaming, "the reference solution mentions %q", m)
			score = 0
		}
	}
	// Expected literals of the tests that the solution writes although
	// neither the instruction nor the environment holds them.
	public := t.Instruction + "\n" + environmentText(t)
	for _, lit := range testLiterals(tests) {
		if strings.Contains(sol, lit) && !strings.Contains(public, lit) {
			j.reject(SolutionGaming, "the reference solution hard-codes the expected value %q", clip(lit, 60))
			score = 0
			break
		}
	}
	return score
}

func (j *judge) completeness(t *harbor.Task, tests map[string]string) float64 {
	paths := checkedPaths(tests)
	if len(paths) == 0 {
		return 1
	}
	named := 0
	for _, p := range paths {
		if namedIn(t.Instruction, p) {
			named++
		} else {
			j.reject(HiddenRequirement, "the verifier reads %s, which the instruction never names", p)
		}
	}
	return float64(named) / float64(len(paths))
}

func (j *judge) clarity(t *harbor.Task, tests map[string]string) float64 {
	score := 1.0
	in := t.Instruction
	switch n := len(strings.TrimSpace(in)); {
	case n < 40:
		j.note("instruction clarity: the instruction is only %d bytes", n)
		score -= 0.5
	case n > 16000:
		j.note("instruction clarity: the instruction is %d bytes", n)
		score -= 0.25
	}
	if !strings.Contains(in, "/") {
		j.note("instruction clarity: the instruction names no path")
		score -= 0.25
	}
	leak := false
	for name, src := range tests {
		base := name[strings.LastIndexByte(name, '/')+1:]
		if base != "test.sh" && strings.Contains(in, base) {
			j.reject(TestLeakage, "the instruction names the test file %s", base)
			leak = true
		}
		if len(src) >= 64 {
			for p, f := range t.Files {
				if strings.HasPrefix(p, harbor.EnvironmentDir+"/") && strings.Contains(string(f.Data), src) {
					j.reject(TestLeakage, "the environment file %s contains the test file %s", p, name)
					leak = true
				}
			}
		}
	}
	if strings.Contains(in, "/tests/") {
		j.reject(TestLeakage, "the instruction points at /tests/")
		leak = true
	}
	if leak {
		return 0
	}
	return math.Max(score, 0)
}

// difficulty grows with the assertions to satisfy and the solution's
// length, saturating at what a long synthesised task reaches.
func difficulty(t *harbor.Task, r *verifier.Report) float64 {
	lines := 0
	for _, l := range strings.Split(string(t.Files[harbor.SolutionPath].Data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines++
		}
	}
	asserts := 1
	if r != nil && r.Total > 0 {
		asserts = r.Total
	}
	return math.Min(1, 0.2+0.08*float64(asserts)+0.02*float64(lines))
}

func (j *judge) novelty(t *harbor.Task, refs []harbor.Reference, cfg Settings) float64 {
	if len(refs) == 0 {
		return 1
	}
	best, name := harbor.Nearest(harbor.FingerprintOf(t), refs)
	if best > cfg.MaxSimilarity {
		j.v.NearDuplicateOf = name
		j.reject(NearDuplicate, "similarity %.2f to reference task %s is above %.2f", best, name, cfg.MaxSimilarity)
	}
	return round(1 - best)
}

// testSources holds the verifier's files other than test.sh's network
// plumbing, by path.
func testSources(t *harbor.Task) map[string]string {
	out := map[string]string{}
	for p, f := range t.Files {
		if strings.HasPrefix(p, harbor.TestsDir+"/") {
			out[p] = string(f.Data)
		}
	}
	return out
}

func environmentText(t *harbor.Task) string {
	var b strings.Builder
	for p, f := range t.Files {
		if strings.HasPrefix(p, harbor.EnvironmentDir+"/") {
			b.Write(f.Data)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

var (
	pathRe      = regexp.MustCompile(`(?:^|[\s'"(\[=,])(/(?:[A-Za-z0-9._@+-]+/)*[A-Za-z0-9._@+-]+)`)
	lineEscapes = regexp.MustCompile(`\\[nt]`)
	literalRe   = regexp.MustCompile(`"((?:[^"\\\n]|\\.){12,})"|'((?:[^'\\\n]|\\.){12,})'`)
	// systemRoots are places every task may read without saying so.
	systemRoots = []string{"/tests", "/logs", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/dev", "/proc", "/sys", "/tmp", "/solution", "/var"}
)

// checkedPaths lists the task paths the tests read, sorted.
func checkedPaths(tests map[string]string) []string {
	seen := map[string]bool{}
	for name, src := range tests {
		if strings.HasSuffix(name, "/test.sh") {
			continue // the runner script, not assertions
		}
		for _, m := range pathRe.FindAllStringSubmatch(src, -1) {
			p := strings.TrimRight(m[1], ".")
			system := false
			for _, r := range systemRoots {
				system = system || p == r || strings.HasPrefix(p, r+"/")
			}
			if !system && strings.Count(p, "/") >= 2 {
				seen[p] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// namedIn reports whether the instruction names p, or names on its own a
// directory that holds p (below the top level, which names nothing in
// particular). A sibling's path does not name its directory: "/app/out/a"
// does not make "/app/out/b" a stated requirement.
func namedIn(instruction, p string) bool {
	if containsPath(instruction, p, true) {
		return true
	}
	for q := p[:strings.LastIndexByte(p, '/')]; strings.Count(q, "/") >= 2; q = q[:strings.LastIndexByte(q, '/')] {
		if containsPath(instruction, q, false) {
			return true
		}
	}
	return false
}

// containsPath finds p in s where the text does not go on to extend it,
// so /app/out does not name /app/output or /app/out.txt; with under, a
// mention of a path below p counts too.
func containsPath(s, p string, under bool) bool {
	for i := 0; i < len(s); {
		k := strings.Index(s[i:], p)
		if k < 0 {
			return false
		}
		end := i + k + len(p)
		if end == len(s) || !extends(s[end:]) && (under || s[end] != '/') {
			return true
		}
		i += k + 1
	}
	return false
}

// extends reports whether rest, the text right after a path, continues
// it: a name character, or a dot followed by one.
func extends(rest string) bool {
	if isNameChar(rest[0]) {
		return true
	}
	return rest[0] == '.' && len(rest) > 1 && isNameChar(rest[1])
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// testLiterals lists long string literals of the test files: expected
// values a solution should compute, not copy.
func testLiterals(tests map[string]string) []string {
	var out []string
	for name, src := range tests {
		if strings.HasSuffix(name, "/test.sh") {
			continue
		}
		for _, m := range literalRe.FindAllStringSubmatch(src, -1) {
			// Line breaks and tabs split a literal into the pieces a
			// script would write; other escapes never match raw text.
			for _, part := range lineEscapes.Split(m[1]+m[2], -1) {
				if len(part) >= 12 && !strings.HasPrefix(part, "/") && !strings.Contains(part, "\\") {
					out = append(out, part)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
