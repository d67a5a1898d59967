package report

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"

	"github.com/t1pipe/t1/schemas"
)

// axisRun has a flat resolve rate, a log-prob gap that barely moves, a
// reward mean that moves a lot, a drift repair kind at zero and one
// missing, and an eval category one policy has no attempts in.
func axisRun() *Run {
	row := func(it int, v map[string]float64) Iteration {
		return Iteration{Iteration: it, PolicyVersion: int64(it), Values: v}
	}
	return &Run{ID: "axes", Status: StatusCompleted, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Metrics: Metrics{
			Columns: []string{ColRewardMean, ColResolveRate, ColExplainedVariance, ColLogProbGap, "repairs_strict_prefix", "repairs_clipped_norm", "repairs_text_retokened", "repairs_new_chunk"},
			Rows: []Iteration{
				row(1, map[string]float64{ColRewardMean: 1, ColResolveRate: 0.46, ColExplainedVariance: 0.2, ColLogProbGap: 0.00026,
					"repairs_strict_prefix": 4, "repairs_clipped_norm": 1, "repairs_text_retokened": 0, "repairs_new_chunk": 2}),
				row(2, map[string]float64{ColRewardMean: 3, ColResolveRate: 0.46, ColExplainedVariance: 0.3, ColLogProbGap: 0.00028,
					"repairs_strict_prefix": 5, "repairs_clipped_norm": 2, "repairs_text_retokened": 1}),
			}},
		Evals: []Eval{
			{Suite: "builtin", PolicyVersion: 0, Tasks: 1, Attempts: 3, ResolveRate: 0, MeanReward: 0.25,
				ByCategory: map[string]schemas.Breakdown{"files": {Attempts: 3, ResolveRate: 0, MeanReward: 0.25}}},
			{Suite: "builtin", PolicyVersion: 2, Tasks: 2, Attempts: 6, ResolveRate: 0.5, MeanReward: 0.7,
				ByCategory: map[string]schemas.Breakdown{"files": {Attempts: 3, ResolveRate: 0.33, MeanReward: 0.5}, "git": {Attempts: 3, ResolveRate: 0.67, MeanReward: 0.9}}},
		}}
}

// figurePanels returns the panels of the document's figure id.
func figurePanels(t *testing.T, d *document, id string) []*plot.Plot {
	t.Helper()
	for _, s := range d.sections {
		for _, b := range s.blocks {
			if b.figure != nil && b.figure.id == id {
				return b.figure.panels
			}
		}
	}
	t.Fatalf("no figure %s", id)
	return nil
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

// Every rate or fraction sits on [0, 1] (a band above 1 for a legend
// carries no ticks); small quantities are drawn from 0; a wide span keeps
// the data's own range.
func TestPanelAxes(t *testing.T) {
	d, err := build([]*Run{axisRun()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		figure   string
		panel    int
		min, max float64
		ticksTop float64 // highest tick; 0: not checked
	}{
		{"reward", 1, 0, 1, 1},                  // resolve rate, flat at 0.46
		{"eval-builtin", 0, 0, 1, 1},            // eval resolve rate
		{"eval-builtin", 1, 0, 1, 1},            // eval partial credit
		{"eval-builtin-category", 0, 0, 1.3, 1}, // two policies: a legend band above 1
		{"eval-builtin-category", 1, 0, 1.3, 1}, // partial credit by category
		{"logprob-gap", 0, 0, 1.1 * 0.00028, 0}, // 0.00026 to 0.00028: from 0
		{"reward", 0, 1, 3, 0},                  // reward 1 to 3: the data's range
		{"explained-variance", 0, 0, 0.3, 0},    // 0.2 to 0.3 with the 0 line
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.figure, tc.panel), func(t *testing.T) {
			ps := figurePanels(t, d, tc.figure)
			if len(ps) <= tc.panel {
				t.Fatalf("%d panels", len(ps))
			}
			p := ps[tc.panel]
			if !near(p.Y.Min, tc.min) || !near(p.Y.Max, tc.max) {
				t.Fatalf("%s: y from %g to %g, want %g to %g", p.Title.Text, p.Y.Min, p.Y.Max, tc.min, tc.max)
			}
			if tc.ticksTop == 0 {
				return
			}
			top := math.Inf(-1)
			for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
				top = math.Max(top, tk.Value)
			}
			if !near(top, tc.ticksTop) {
				t.Errorf("%s: highest tick %g, want %g", p.Title.Text, top, tc.ticksTop)
			}
		})
	}
}

// A rate outside [0, 1] widens the fixed axis instead of being cut off.
func TestRateAxisWidens(t *testing.T) {
	r := axisRun()
	r.Evals[1].MeanReward = 1.4
	d, err := build([]*Run{r})
	if err != nil {
		t.Fatal(err)
	}
	if p := figurePanels(t, d, "eval-builtin")[1]; p.Y.Min != 0 || p.Y.Max != 1.4 {
		t.Errorf("y from %g to %g, want 0 to 1.4", p.Y.Min, p.Y.Max)
	}
}

// stubs counts the filled zero-bar stubs in svg: rectangles zeroStub high.
func stubs(svg string) int {
	n := 0
	for _, m := range regexp.MustCompile(`<path d="M([-\d.]+),([-\d.]+)L([-\d.]+),([-\d.]+)L([-\d.]+),([-\d.]+)L([-\d.]+),([-\d.]+)Z" style="fill:`).FindAllStringSubmatch(svg, -1) {
		f := make([]float64, 8)
		for i := range f {
			f[i], _ = strconv.ParseFloat(m[i+1], 64)
		}
		if f[1] == f[3] && f[5] == f[7] && math.Abs(f[5]-f[1]-float64(zeroStub)) < 0.01 {
			n++
		}
	}
	return n
}

// A zero bar is drawn as a stub at 0 labelled "0"; a missing value as
// "n/a" with no stub, so the two never look alike.
func TestZeroAndMissingBars(t *testing.T) {
	d, err := build([]*Run{axisRun()})
	if err != nil {
		t.Fatal(err)
	}
	mark := func(s string) *regexp.Regexp {
		return regexp.MustCompile(fmt.Sprintf(`font-size:%gpx(;fill:#[0-9A-F]+)?">%s</text>`, float64(markSize), regexp.QuoteMeta(s)))
	}
	for _, tc := range []struct {
		figure         string
		zeros, missing int
	}{
		{"drift-repairs", 1, 1},         // text retokened 0 in iteration 1, new chunk missing in 2
		{"eval-builtin", 1, 0},          // resolve rate 0 at v0
		{"eval-builtin-category", 1, 2}, // v0: files resolve 0, no git (resolve and partial credit)
		{"pool-categories", 0, 0},
	} {
		t.Run(tc.figure, func(t *testing.T) {
			ps := figurePanels(t, d, tc.figure)
			if len(ps) == 0 {
				if tc.zeros+tc.missing > 0 {
					t.Fatal("no panels")
				}
				return
			}
			svg, err := renderSVG(tc.figure, ps)
			if err != nil {
				t.Fatal(err)
			}
			s := string(svg)
			if z, n, st := len(mark("0").FindAllString(s, -1)), len(mark("n/a").FindAllString(s, -1)), stubs(s); z != tc.zeros || st != tc.zeros || n != tc.missing {
				t.Errorf("%d zero labels, %d stubs, %d n/a; want %d, %d, %d", z, st, n, tc.zeros, tc.zeros, tc.missing)
			}
		})
	}
}

// Every table of the HTML page sits in a container that scrolls it
// sideways, so a wide table never widens the page.
func TestHTMLTablesScroll(t *testing.T) {
	r := axisRun()
	wide := strings.Repeat("a-very-long-column-name-", 8)
	r.Metrics.Columns = append(r.Metrics.Columns, wide)
	r.Metrics.Rows[0].Values[wide] = 1
	_, html, err := Render([]*Run{r, axisRun()})
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	if !regexp.MustCompile(`\.scroll \{[^}]*overflow-x: auto;`).MatchString(page) {
		t.Fatal("the page has no sideways-scrolling container style")
	}
	tables := strings.Count(page, "<table")
	if tables == 0 || strings.Count(page, `<div class="scroll"><table>`) != tables || strings.Count(page, "</table></div>") != tables {
		t.Errorf("%d tables, %d in a scrolling container", tables, strings.Count(page, `<div class="scroll"><table>`))
	}
	if !strings.Contains(page, wide) {
		t.Error("the wide column is missing")
	}
}
