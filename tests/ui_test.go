package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas/routing"
)

// exitCode is the exit status of a command's error (0 without one).
func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// rows is `t1 query TABLE --format json` of run tiny.
func rows[T any](t *testing.T, data, cfg, table string, args ...string) []T {
	t.Helper()
	out, err := command(t, data, cfg, append([]string{"query", table, "--run", "tiny", "--format", "json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("query %s: %v\n%s", table, err, out)
	}
	var rs []T
	if err := json.Unmarshal(out, &rs); err != nil {
		t.Fatalf("query %s: %v\n%s", table, err, out)
	}
	return rs
}

// What the browser script saw (ui/testdata/browser.mjs).
type seen struct {
	Errors, Foreign, Runs []string
	Curves                []struct {
		Title  string
		Canvas bool
	}
	IterationHead []string
	Iterations    [][]string
	AttemptsCount string
	ByRewardDesc  [][]string
	EvalCount     string
	BadWhere      string
	Clicked       []string
	RoutingToken  int
	Attempt       seenAttempt
	Advantage     []seenToken
	Gap           []struct {
		I     int
		Style string
		Title string
	}
	GapErrors []string
	Routing   struct {
		Picked, Live [][]int
		Mismatch     [][]string
		Errors       []string
	}
	Compare []struct{ Version, Attempts int }
	Unknown struct {
		Status int
		Text   string
	}
}

type seenAttempt struct {
	Verdict    string
	Assertions []struct {
		Text string
		Pass bool
	}
	Turns   []int
	Tokens  int
	Sampled []seenToken
}

type seenToken struct {
	I     int
	Style string
}

// `t1 ui` over a small run, in a real browser: the runs list leads to the
// run, its curves are drawn, its attempts sort and filter, a click opens
// an attempt whose verdict, turns and coloured tokens are the tables',
// a token opens its experts (the routing record's), a comparison shows
// two policies; a run that does not exist is a 404 naming the one that
// does; nothing is fetched from anywhere but the server.
func TestUIInBrowser(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	node, chromium := testinfra.Playwright(t, "../ui/testdata/node_modules")
	script, err := filepath.Abs("../ui/testdata/browser.mjs")
	if err != nil {
		t.Fatal(err)
	}
	testinfra.Bubblewrap(t)
	data := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "pipeline.yaml")
	twoIterations := strings.Replace(tinyPipeline, "    iterations: 1\n", "    iterations: 2\n", 1)
	if err := os.WriteFile(cfg, []byte(twoIterations), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := command(t, data, cfg, "run", "--log-level", "warn").CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}

	// A run that does not exist is refused before anything listens.
	if out, err := command(t, data, cfg, "ui", "--run", "tinny", "--addr", "127.0.0.1:0").CombinedOutput(); exitCode(err) != 2 ||
		!strings.Contains(string(out), `"tinny"`) || !strings.Contains(string(out), "tiny") {
		t.Fatalf("ui --run tinny: %v\n%s", err, out)
	}
	ui := command(t, data, cfg, "ui", "--addr", "127.0.0.1:0", "--log-level", "warn")
	stdout, err := ui.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ui.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ui.Process.Kill(); ui.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("ui printed no URL: %v", err)
	}
	base := line[strings.Index(line, "http://"):]
	base = strings.TrimSpace(base)
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("ui listens on %q, not loopback", base)
	}

	shots := os.Getenv("T1_UI_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	start := time.Now()
	out, err := exec.Command(node, script, base, "tiny", shots, chromium).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("browser: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("browser script: %s", time.Since(start).Round(time.Millisecond))
	var s seen
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(s.Errors) > 0 || len(s.Foreign) > 0 {
		t.Errorf("script errors %q, requests elsewhere %q", s.Errors, s.Foreign)
	}
	if !slices.Contains(s.Runs, "tiny") {
		t.Errorf("runs list %q", s.Runs)
	}
	if len(s.Curves) != 6 {
		t.Errorf("curves %+v", s.Curves)
	}
	for _, c := range s.Curves {
		if !c.Canvas || c.Title == "" {
			t.Errorf("curve %+v not drawn", c)
		}
	}

	// The iterations table is the metrics table.
	metrics := rows[map[string]any](t, data, cfg, "metrics")
	if len(s.Iterations) != len(metrics) {
		t.Fatalf("%d iterations shown, %d metrics rows", len(s.Iterations), len(metrics))
	}
	for i, m := range metrics {
		for c, col := range s.IterationHead {
			want, ok := m[col].(float64)
			if !ok || col == "iteration" {
				continue
			}
			got, err := strconv.ParseFloat(s.Iterations[i][c], 64)
			if err != nil || math.Abs(got-want) > 1e-3*math.Max(1, math.Abs(want)) {
				t.Errorf("iteration %d %s: shown %q, table %v", i, col, s.Iterations[i][c], want)
			}
		}
	}

	type attempt struct {
		TaskID        string  `json:"task_id"`
		Attempt       int     `json:"attempt"`
		Iteration     int     `json:"iteration"`
		Purpose       string  `json:"purpose"`
		PolicyVersion int64   `json:"policy_version"`
		Reward        float64 `json:"reward"`
		Passed        int     `json:"passed"`
		Total         int     `json:"total"`
		Assertions    []struct {
			Name   string `json:"name"`
			Passed bool   `json:"passed"`
		} `json:"assertions"`
	}
	trajs := rows[attempt](t, data, cfg, "trajectories")
	rewards := rows[attempt](t, data, cfg, "rewards")
	if want := fmt.Sprintf("%d attempts", len(trajs)); s.AttemptsCount != want {
		t.Errorf("attempts page says %q, want %q", s.AttemptsCount, want)
	}
	evals := 0
	for _, a := range trajs {
		if a.Purpose == "eval" {
			evals++
		}
	}
	if want := fmt.Sprintf("%d attempts", evals); s.EvalCount != want {
		t.Errorf("filtered to eval: %q, want %q", s.EvalCount, want)
	}
	best := math.Inf(-1)
	for _, r := range rewards {
		best = math.Max(best, r.Reward)
	}
	if len(s.ByRewardDesc) == 0 || s.ByRewardDesc[0][5] != strconv.FormatFloat(best, 'g', -1, 64) {
		t.Errorf("sorted by reward, descending: first row %q, best reward %v", s.ByRewardDesc, best)
	}
	if !strings.Contains(s.BadWhere, `"rewrd"`) || !strings.Contains(s.BadWhere, "reward") {
		t.Errorf("bad filter: %q", s.BadWhere)
	}

	// The attempt clicked: its verdict, turns and tokens.
	c := s.Clicked
	it, _ := strconv.Atoi(c[0])
	v, _ := strconv.ParseInt(c[2], 10, 64)
	n, _ := strconv.Atoi(c[4])
	if c[1] != "train" {
		t.Fatalf("clicked %q, not a training attempt", c)
	}
	where := fmt.Sprintf("task_id = '%s' AND attempt = %d AND policy_version = %d", c[3], n, v)
	var rw *attempt
	for i, r := range rewards {
		if r.TaskID == c[3] && r.Attempt == n && r.PolicyVersion == v && r.Iteration == it && r.Purpose == "train" {
			rw = &rewards[i]
		}
	}
	if rw == nil {
		t.Fatalf("no rewards row for %q", c)
	}
	if want := fmt.Sprintf("reward %s · %d/%d assertions passed", strconv.FormatFloat(rw.Reward, 'g', -1, 64), rw.Passed, rw.Total); !strings.HasPrefix(s.Attempt.Verdict, want) {
		t.Errorf("verdict %q, want %q", s.Attempt.Verdict, want)
	}
	if len(s.Attempt.Assertions) != len(rw.Assertions) {
		t.Errorf("assertions %+v, table %+v", s.Attempt.Assertions, rw.Assertions)
	}
	for i, a := range rw.Assertions {
		if i < len(s.Attempt.Assertions) && (!strings.HasSuffix(s.Attempt.Assertions[i].Text, a.Name) || s.Attempt.Assertions[i].Pass != a.Passed) {
			t.Errorf("assertion %d shown %+v, table %+v", i, s.Attempt.Assertions[i], a)
		}
	}
	type turn struct {
		Turn int `json:"turn"`
	}
	var turns []int
	for _, r := range rows[turn](t, data, cfg, "turns", "--where", where+" AND purpose = 'train'", "--select", "turn") {
		turns = append(turns, r.Turn)
	}
	if !slices.Equal(turns, s.Attempt.Turns) {
		t.Errorf("turns shown %v, table %v", s.Attempt.Turns, turns)
	}
	type chunk struct {
		Chunk    int       `json:"chunk"`
		IDs      []int32   `json:"token_ids"`
		LogProbs []float64 `json:"logprobs"`
		Mask     []bool    `json:"loss_mask"`
		Adv      []float64 `json:"advantages"`
		Record   []byte    `json:"record"`
	}
	toks := rows[chunk](t, data, cfg, "tokens", "--where", where, "--select", "chunk,token_ids,logprobs,loss_mask")
	vals := rows[chunk](t, data, cfg, "values", "--where", where, "--select", "chunk,advantages")
	recs := rows[chunk](t, data, cfg, "routing", "--where", where, "--select", "chunk,record")
	var lps, advs []float64
	var sampled []int
	total, scale := 0, 0.0
	for i, ch := range toks {
		for j, m := range ch.Mask {
			if m {
				sampled = append(sampled, total+j)
			}
		}
		total += len(ch.IDs)
		lps = append(lps, ch.LogProbs...)
		if i < len(vals) && vals[i].Chunk == ch.Chunk {
			advs = append(advs, vals[i].Adv...)
		}
	}
	for _, a := range advs {
		scale = math.Max(scale, math.Abs(a))
	}
	if s.Attempt.Tokens != total || total == 0 {
		t.Errorf("%d tokens shown, the tokens table holds %d", s.Attempt.Tokens, total)
	}
	var shown []int
	for _, tk := range s.Attempt.Sampled {
		shown = append(shown, tk.I)
		if want := fmt.Sprintf("background:hsl(%d,75%%,78%%)", int(math.Round(120*math.Exp(lps[tk.I])))); tk.Style != want {
			t.Errorf("token %d coloured %q, its log-prob %v gives %q", tk.I, tk.Style, lps[tk.I], want)
		}
	}
	if !slices.Equal(shown, sampled) {
		t.Errorf("sampled tokens shown %v, loss mask %v", shown, sampled)
	}
	if len(advs) != total || len(s.Advantage) != len(sampled) {
		t.Fatalf("%d advantages of %d tokens; %d coloured", len(advs), total, len(s.Advantage))
	}
	for _, tk := range s.Advantage {
		a := advs[tk.I]
		want := "background:hsl(0,0%,92%)"
		if scale > 0 {
			hue := 120
			if a < 0 {
				hue = 0
			}
			want = fmt.Sprintf("background:hsl(%d,70%%,%d%%)", hue, int(math.Round(95-40*math.Min(math.Abs(a)/scale, 1))))
		}
		if tk.Style != want {
			t.Errorf("token %d advantage %v coloured %q, want %q", tk.I, a, tk.Style, want)
		}
	}

	// The gap: the sampler's log-prob as the table holds it, the
	// trainer's beside it, their difference, coloured by it.
	if len(s.GapErrors) > 0 || len(s.Gap) != len(sampled) {
		t.Fatalf("gap view: errors %q, %d tokens coloured of %d", s.GapErrors, len(s.Gap), len(sampled))
	}
	gapRe := regexp.MustCompile(`log-prob (-?[0-9.]+) \(p [0-9.]+\) · .*trainer log-prob (-?[0-9.]+) \(gap ([-+][0-9.]+)\)`)
	for _, tk := range s.Gap {
		m := gapRe.FindStringSubmatch(tk.Title)
		if m == nil {
			t.Fatalf("token %d title %q", tk.I, tk.Title)
		}
		samp, _ := strconv.ParseFloat(m[1], 64)
		train, _ := strconv.ParseFloat(m[2], 64)
		gap, _ := strconv.ParseFloat(m[3], 64)
		if math.Abs(samp-lps[tk.I]) > 1e-4 || math.Abs(train-samp-gap) > 2e-4 {
			t.Errorf("token %d: %q; the table's log-prob %v", tk.I, tk.Title, lps[tk.I])
		}
		hue := 210
		if strings.HasPrefix(m[3], "-") {
			hue = 30
		}
		if !strings.HasPrefix(tk.Style, fmt.Sprintf("background:hsl(%d,80%%,", hue)) {
			t.Errorf("token %d gap %v coloured %q", tk.I, gap, tk.Style)
		}
	}

	// The experts of the token clicked, decoded from its chunk's record.
	at := s.RoutingToken
	var picked [][]int
	for _, r := range recs {
		rec, err := routing.Decode(r.Record)
		if err != nil {
			t.Fatal(err)
		}
		if at < rec.Tokens {
			for l := range rec.Layers {
				var ids []int
				for j := range rec.TopK {
					ids = append(ids, rec.At(at, l, j))
				}
				picked = append(picked, ids)
			}
			break
		}
		at -= rec.Tokens
	}
	if len(picked) == 0 || fmt.Sprint(picked) != fmt.Sprint(s.Routing.Picked) {
		t.Errorf("token %d's experts shown %v, record %v", s.RoutingToken, s.Routing.Picked, picked)
	}
	// Replay off: the router's own experts beside the sampler's, and per
	// layer the share routed otherwise over every token a record covers.
	covered := 0
	for i, r := range recs {
		rec, _ := routing.Decode(r.Record)
		covered += min(rec.Tokens, len(toks[i].IDs)-1)
	}
	if len(s.Routing.Errors) > 0 || len(s.Routing.Live) != len(picked) || len(s.Routing.Mismatch) != len(picked) {
		t.Fatalf("routing page: errors %q, live %v, mismatch %v", s.Routing.Errors, s.Routing.Live, s.Routing.Mismatch)
	}
	for l, row := range s.Routing.Mismatch {
		n, _ := strconv.Atoi(row[1])
		d, _ := strconv.Atoi(row[2])
		if row[0] != strconv.Itoa(l) || n != covered || d < 0 || d > n || len(s.Routing.Live[l]) != len(picked[l]) {
			t.Errorf("layer %d: mismatch row %q over %d covered tokens", l, row, covered)
		}
	}
	if len(s.Compare) != 2 || s.Compare[0].Version == s.Compare[1].Version || s.Compare[0].Attempts == 0 || s.Compare[1].Attempts == 0 {
		t.Errorf("compare %+v", s.Compare)
	}
	if s.Unknown.Status != 404 || !strings.Contains(s.Unknown.Text, "no-such-run") || !strings.Contains(s.Unknown.Text, "tiny") {
		t.Errorf("unknown run page %+v", s.Unknown)
	}
}
