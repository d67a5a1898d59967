package verifier

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Status is one assertion's outcome.
type Status string

// The four outcomes. CTRF "pending" maps to skipped and "other" to error;
// a JUnit <failure> is failed and an <error> is error.
const (
	Passed  Status = "passed"
	Failed  Status = "failed"
	Skipped Status = "skipped"
	Error   Status = "error"
)

// Source names where a Report's result came from, in precedence order.
type Source string

const (
	SourceCTRF       Source = "ctrf"
	SourceJUnit      Source = "junit"
	SourceRewardJSON Source = "reward.json"
	SourceRewardTxt  Source = "reward.txt"
	SourceExitCode   Source = "exit_code"
)

// File names looked for in the verifier's log directory (/logs/verifier).
const (
	CTRFFile       = "ctrf.json"
	JUnitFile      = "junit.xml"
	RewardJSONFile = "reward.json"
	RewardTxtFile  = "reward.txt"
)

// Bounds on what a report may hold; longer text is cut at a UTF-8
// boundary and marked with an ellipsis.
const (
	MaxFileBytes    = 16 << 20
	MaxNameBytes    = 512
	MaxMessageBytes = 2048
	MaxAssertions   = 100000
)

// Assertion is one reported test.
type Assertion struct {
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Message string `json:"message,omitempty"`
}

// Report is what a verifier run produced, reduced to one result.
//
// Precedence: the first source that parses and holds at least one
// assertion or a reward wins — CTRF JSON, JUnit XML, reward.json,
// reward.txt — and the exit code, which always exists, ends the chain, so
// every run has a result. A source that is present but malformed (or holds
// no tests) adds a line to Problems and the next one is tried. Reward
// files are read even when a per-assertion source wins, so Reward carries
// the verifier's own figure whenever it wrote one.
type Report struct {
	Source     Source      `json:"source"`
	Assertions []Assertion `json:"assertions,omitempty"`
	// Passed, Failed, Skipped and Errors count Assertions by status;
	// Total is len(Assertions).
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	Errors  int `json:"errors"`
	Total   int `json:"total"`
	// Reward is the primary value of reward.json ("reward", or its only
	// key), else of reward.txt; nil when neither gave one. Rewards holds
	// every reward.json metric.
	Reward  *float64           `json:"reward,omitempty"`
	Rewards map[string]float64 `json:"rewards,omitempty"`
	// ExitCode is test.sh's exit status (-1 when it was killed).
	ExitCode int `json:"exit_code"`
	// Fallback is set when no per-assertion source was usable, so the
	// result is binary.
	Fallback bool `json:"fallback"`
	// Solved: every non-skipped assertion passed and at least one did;
	// for reward files, reward ≥ 1; for the exit code, exit status 0.
	Solved   bool     `json:"solved"`
	Problems []string `json:"problems,omitempty"`
	// Output is the end of test.sh's stdout and stderr (MaxOutputBytes),
	// kept when it failed without writing any result (Explain).
	Output string `json:"output,omitempty"`
}

// MaxOutputBytes bounds Report.Output, which keeps the end of test.sh's
// output, where the error that stopped it is.
const MaxOutputBytes = 8192

// Explain keeps why a run has no result of its own: when test.sh failed
// (exit status not 0) and left nothing to read (the exit code is the
// result), the end of its output goes to Output and its last line, with
// the exit status, to Problems, so that "0 of 0 passed" never stands
// without a reason.
func (r *Report) Explain(output string) {
	if r.Source != SourceExitCode || r.ExitCode == 0 || r.Reward != nil {
		return
	}
	r.Output = tail(output, MaxOutputBytes)
	last := "no output"
	if lines := strings.Split(strings.TrimRight(r.Output, "\n"), "\n"); lines[len(lines)-1] != "" {
		last = "its output ends: " + bound(lines[len(lines)-1], MaxMessageBytes)
	}
	r.Problems = append(r.Problems, fmt.Sprintf("test.sh exited %d without writing results (CTRF, JUnit or a reward file); %s", r.ExitCode, last))
}

// tail is bound's counterpart for output, whose end matters: the last max
// bytes of s at a rune boundary, after an ellipsis.
func tail(s string, max int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= max {
		return s
	}
	const ell = "…"
	cut := len(s) - max + len(ell)
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return ell + s[cut:]
}

// Files holds the contents of a verifier log directory by file name; a
// missing key means the file does not exist.
type Files map[string][]byte

// ReadDir reads the report files from dir (a host copy of /logs/verifier).
// Missing files are simply absent; a file over MaxFileBytes or one that is
// not a regular file is recorded as a problem for Build to report. No
// link is followed, dir itself included: the verifier's sandbox decides
// what its log directory holds, and a link there (copied as a link) would
// otherwise make the host read its own files into the report.
func ReadDir(dir string) (Files, []string) {
	files := Files{}
	var problems []string
	d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return files, nil
	}
	if err != nil {
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return files, []string{"the verifier's log directory is a symbolic link; links are never followed, so none of its reports were read"}
		}
		return files, []string{fmt.Sprintf("the verifier's log directory: %v", err)}
	}
	defer d.Close()
	for _, name := range []string{CTRFFile, JUnitFile, RewardJSONFile, RewardTxtFile} {
		data, problem := readReport(int(d.Fd()), name)
		switch {
		case problem != "":
			problems = append(problems, problem)
		case data != nil:
			files[name] = data
		}
	}
	return files, problems
}

// readReport reads one report file in the directory dfd, never through a
// link and never blocking on a fifo; nil data and no problem means it
// does not exist.
func readReport(dfd int, name string) ([]byte, string) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ""
		}
		return nil, fmt.Sprintf("%s: %v", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Sprintf("%s: not a regular file (%s); ignored", name, modeType(st.Mode))
	}
	if st.Size > MaxFileBytes {
		return nil, fmt.Sprintf("%s: %d bytes, over the %d-byte limit; ignored", name, st.Size, MaxFileBytes)
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Sprintf("%s: changed while being read; ignored", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Sprintf("%s: %v", name, err)
	case len(data) > MaxFileBytes:
		return nil, fmt.Sprintf("%s: over the %d-byte limit; ignored", name, MaxFileBytes)
	}
	return data, ""
}

// modeType names a file type the way fs.FileMode prints it.
func modeType(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// Parse reads dir and builds the report for a run that exited with
// exitCode. It never fails: every problem ends up in Report.Problems.
func Parse(dir string, exitCode int) *Report {
	files, problems := ReadDir(dir)
	r := Build(files, exitCode)
	r.Problems = append(problems, r.Problems...)
	return r
}

// Build applies the precedence order to files already read.
func Build(files Files, exitCode int) *Report {
	r := &Report{ExitCode: exitCode}
	// Reward files are parsed first, so that Reward is filled whatever
	// wins, but their problems are listed after those of the sources that
	// come before them.
	var rewardProblems []string
	note := func(to *[]string, name string, err error) {
		*to = append(*to, fmt.Sprintf("%s: %s", name, bound(err.Error(), MaxMessageBytes)))
	}
	defer func() { r.Problems = append(r.Problems, rewardProblems...) }()
	var jsonReward, txtReward *float64
	if data, ok := files[RewardJSONFile]; ok {
		if v, all, err := ParseRewardJSON(data); err != nil {
			note(&rewardProblems, RewardJSONFile, err)
			r.Rewards = all
		} else {
			jsonReward, r.Rewards = &v, all
		}
	}
	if data, ok := files[RewardTxtFile]; ok {
		if v, err := ParseRewardTxt(data); err != nil {
			note(&rewardProblems, RewardTxtFile, err)
		} else {
			txtReward = &v
		}
	}
	if jsonReward != nil && txtReward != nil && *jsonReward != *txtReward {
		rewardProblems = append(rewardProblems, fmt.Sprintf("reward.json says %v, reward.txt says %v; reward.json is used", *jsonReward, *txtReward))
	}
	r.Reward = jsonReward
	if r.Reward == nil {
		r.Reward = txtReward
	}

	for _, src := range []struct {
		name   string
		source Source
		parse  func([]byte) ([]Assertion, error)
	}{{CTRFFile, SourceCTRF, ParseCTRF}, {JUnitFile, SourceJUnit, ParseJUnit}} {
		data, ok := files[src.name]
		if !ok {
			continue
		}
		as, err := src.parse(data)
		if err == nil && len(as) == 0 {
			err = errors.New("no tests reported")
		}
		if err != nil {
			note(&r.Problems, src.name, err)
			continue
		}
		r.Source, r.Assertions = src.source, as
		r.count()
		return r
	}
	r.Fallback = true
	switch {
	case jsonReward != nil:
		r.Source, r.Solved = SourceRewardJSON, *jsonReward >= 1
	case txtReward != nil:
		r.Source, r.Solved = SourceRewardTxt, *txtReward >= 1
	default:
		r.Source, r.Solved = SourceExitCode, exitCode == 0
	}
	return r
}

func (r *Report) count() {
	r.Passed, r.Failed, r.Skipped, r.Errors = 0, 0, 0, 0
	for _, a := range r.Assertions {
		switch a.Status {
		case Passed:
			r.Passed++
		case Failed:
			r.Failed++
		case Skipped:
			r.Skipped++
		default:
			r.Errors++
		}
	}
	r.Total = len(r.Assertions)
	r.Solved = r.Passed > 0 && r.Failed == 0 && r.Errors == 0
}

// bound makes s valid UTF-8 and cuts it to at most max bytes, on a rune
// boundary, ending in "…" when cut.
func bound(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) <= max {
		return s
	}
	const ell = "…"
	cut := max - len(ell)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}
