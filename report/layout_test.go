package report

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/schemas"
)

var keepScreenshot = flag.String("screenshot", "", "keep the layout test's screenshot of the report's first screen at this path")

// A laptop's browser window: the answer must be within its first screen.
const screenW, screenH = 1280, 800

// defaultShaped is a run shaped like `make run`'s: every fact and event
// type the default run reports, three metrics rows, and the held-out
// suite of 24 tasks × 2 attempts evaluated for v0, v1 and v4 — the tables
// that, placed first, pushed the answer thousands of pixels down.
func defaultShaped() *Run {
	start := time.Date(2026, 12, 6, 0, 6, 26, 0, time.UTC)
	r := &Run{ID: "main", Status: StatusCompleted, Started: start, Ended: start.Add(399 * time.Second), PolicyVersion: 4,
		Config: Config{Seed: 1, RewardScale: 1, Iterations: 3, ConfigHash: "c0034545d280ad77",
			Model: schemas.ModelDims{Vocab: 512, Layers: 2, TopK: 2, Experts: 8}, EvalSuites: []string{"builtin"}},
		Events: map[string]uint64{}, Pools: []Pool{{Version: 1, Tasks: 183, Excluded: 3, Categories: map[string]int{"file-operations": 164, "text-processing": 19}}},
		SFT: []SFT{{PolicyVersion: 1, Loss: 0.00044, Demonstrations: 183}}}
	for _, typ := range schemas.EventTypes() {
		r.Events[typ] = 3
	}
	for it := range 3 {
		vals := map[string]float64{}
		for i, c := range []string{ColRewardMean, ColResolveRate, ColExplainedVariance, ColLogProbGap, ColClipFraction, ColPolicyLoss, ColValueLoss,
			ColRoutingFlips, ColApproxKL, ColGradNorm, ColLiveKL, ColExpertsSwitched, ColStrictPrefix, ColClippedNorm, ColTextRetokened, ColNewChunk} {
			vals[c] = float64(it+1) * 0.01 * float64(i+1)
		}
		r.Metrics.Rows = append(r.Metrics.Rows, Iteration{Iteration: it, PolicyVersion: int64(it + 2), Values: vals})
	}
	r.Metrics.Columns = []string{ColRewardMean, ColResolveRate, ColExplainedVariance, ColLogProbGap, ColClipFraction, ColPolicyLoss, ColValueLoss,
		ColRoutingFlips, ColApproxKL, ColGradNorm, ColLiveKL, ColExpertsSwitched}
	for _, v := range []struct {
		version int64
		solved  int // of 48
	}{{0, 0}, {1, 41}, {4, 43}} {
		n := 0
		for task := range 24 {
			for a := range 2 {
				ok := n < v.solved
				n++
				r.EvalResults = append(r.EvalResults, EvalResult{Suite: "builtin", TaskID: fmt.Sprintf("eval-syn-%02d", task), Attempt: a,
					PolicyVersion: v.version, Solved: ok, Difficulty: "easy", Category: "file-operations"})
			}
		}
		r.Evals = append(r.Evals, Eval{Suite: "builtin", PolicyVersion: v.version, Tasks: 24, Attempts: 48,
			ResolveRate: float64(v.solved) / 48, MeanReward: float64(v.solved) / 46, MeanTurns: 2})
	}
	return r
}

// measure is run by the browser after the page has laid out: it writes the
// answer table's box and the viewport into the DOM, which --dump-dom
// prints, so the test reads the positions the browser itself computed.
const measure = `<script>
(function () {
  var t = document.querySelector('#answer table');
  var b = document.body;
  b.setAttribute('data-viewport', innerWidth + 'x' + innerHeight);
  if (t) {
    var r = t.getBoundingClientRect();
    b.setAttribute('data-answer-box', r.top + ',' + r.bottom + ',' + r.left + ',' + r.right);
  }
})();
</script>
</body>`

// chromium finds the headless browser, skipping the test without one
// unless T1_REQUIRE_CHROMIUM (set by .ci/run) demands it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("T1_REQUIRE_CHROMIUM") != "" {
		t.Fatal("T1_REQUIRE_CHROMIUM is set but chromium is not on PATH (make deps installs it)")
	}
	t.Skip("chromium is not installed (make deps installs it): the report's first-screen layout is not checked")
	return ""
}

// runChromium runs the browser headless at the laptop's window size on
// page, with its profile in a directory of its own so that runs beside
// each other do not share one.
func runChromium(t *testing.T, bin, page string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// --no-sandbox: the page is the test's own file, and the browser's
	// sandbox does not start as root, as CI runs.
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--mute-audio",
		"--user-data-dir=" + t.TempDir(), fmt.Sprintf("--window-size=%d,%d", screenW, screenH)}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), "file://"+page)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

var (
	viewportAttr = regexp.MustCompile(`data-viewport="(\d+)x(\d+)"`)
	answerAttr   = regexp.MustCompile(`data-answer-box="([-0-9.e]+),([-0-9.e]+),([-0-9.e]+),([-0-9.e]+)"`)
)

// The base → SFT → RL table is within the first 1280×800 screen of the
// HTML report of a run shaped like the default one, as headless Chromium
// lays it out: the browser reports the table's box (--dump-dom with a
// measuring script added to a copy of the page), and its screenshot of
// that screen shows the table's header row where the box says it is.
func TestAnswerInFirstScreen(t *testing.T) {
	bin := chromium(t)
	_, html, err := Render([]*Run{defaultShaped()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, html, 0o644); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(dir, "probe.html")
	if err := os.WriteFile(probe, []byte(strings.Replace(string(html), "</body>", measure, 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	dom := runChromium(t, bin, probe, "--dump-dom")
	vp := viewportAttr.FindSubmatch(dom)
	if vp == nil {
		t.Fatalf("the measuring script did not run: no data-viewport in the dumped DOM (%d bytes)", len(dom))
	}
	w, _ := strconv.Atoi(string(vp[1]))
	h, _ := strconv.Atoi(string(vp[2]))
	if w != screenW || h <= 0 || h > screenH {
		t.Fatalf("viewport %dx%d, want %d wide and at most %d high", w, h, screenW, screenH)
	}
	box := answerAttr.FindSubmatch(dom)
	if box == nil {
		t.Fatal("no table in the report's #answer section")
	}
	var top, bottom float64
	for i, p := range []*float64{&top, &bottom} {
		if *p, err = strconv.ParseFloat(string(box[i+1]), 64); err != nil {
			t.Fatal(err)
		}
	}
	right, _ := strconv.ParseFloat(string(box[4]), 64)
	t.Logf("viewport %dx%d; answer table from y=%.0f to y=%.0f, right edge x=%.0f", w, h, top, bottom, right)
	if top < 0 || bottom > float64(h) {
		t.Fatalf("the answer table spans y=%.0f..%.0f: not within the first %d px", top, bottom, h)
	}
	if right > float64(w) {
		t.Errorf("the answer table's right edge is at x=%.0f, beyond the %d px window", right, w)
	}
	if n := bytes.Count(html, []byte("base → SFT → RL")); n != 1 {
		t.Errorf("the page names base → SFT → RL %d times, want the one table", n)
	}

	shot := filepath.Join(dir, "first-screen.png")
	runChromium(t, bin, page, "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != screenW || b.Dy() != screenH {
		t.Fatalf("screenshot %dx%d, want %dx%d", b.Dx(), b.Dy(), screenW, screenH)
	}
	// The header row's fill (th, #f2f2f2) in the band the box gave: the
	// screenshot agrees with the measurement.
	if n := countColour(img, int(top), min(int(top)+40, screenH), 0xf2); n < 200 {
		t.Errorf("only %d pixels of the table header's fill between y=%.0f and y=%.0f of the screenshot", n, top, top+40)
	}
	if *keepScreenshot != "" {
		data, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(*keepScreenshot, data, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// countColour counts the grey pixels of level v in rows y0..y1.
func countColour(img image.Image, y0, y1 int, v uint32) int {
	n := 0
	for y := max(y0, 0); y < y1; y++ {
		for x := range img.Bounds().Dx() {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 == v && g>>8 == v && b>>8 == v {
				n++
			}
		}
	}
	return n
}
