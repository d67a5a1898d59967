package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figure sizes: one panel, or a row of panels.
const (
	panelWidth  = 4.6 * vg.Inch
	panelHeight = 3 * vg.Inch
)

// line is one series of a line panel.
type line struct {
	name   string
	xs, ys []float64
}

// add appends a point, dropping NaN and infinities, which plots cannot place.
func (l *line) add(x, y float64) {
	if math.IsNaN(y) || math.IsInf(y, 0) {
		return
	}
	l.xs = append(l.xs, x)
	l.ys = append(l.ys, y)
}

// group is one series of a bar panel: a value per category.
type group struct {
	name   string
	values []float64
}

var gray = color.Gray{Y: 140}

// newPanel is an empty plot in the report's style.
func newPanel(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	sans := func(s *font.Font, size vg.Length) { s.Typeface, s.Variant, s.Size = "Liberation", "Sans", size }
	sans(&p.Title.TextStyle.Font, 11)
	sans(&p.X.Label.TextStyle.Font, 9)
	sans(&p.Y.Label.TextStyle.Font, 9)
	sans(&p.X.Tick.Label.Font, 8)
	sans(&p.Y.Tick.Label.Font, 8)
	sans(&p.Legend.TextStyle.Font, 8)
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xlabel, ylabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// integerTicks marks whole numbers only (iterations, policy versions).
var integerTicks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	step := math.Max(1, math.Ceil((hi-lo)/8))
	var ts []plot.Tick
	for v := math.Ceil(lo); v <= hi; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: fmt.Sprintf("%d", int64(v))})
	}
	return ts
})

// yScale says how a panel chooses its y range.
type yScale int

const (
	// scaleData follows the data, with 0 brought in when the data's span
	// is small against their size (see fitData).
	scaleData yScale = iota
	// scaleRate fixes the axis at [0, 1] for rates and fractions, so a
	// flat 0.46 reads as 0.46 and panels compare at a glance.
	scaleRate
)

// linePanel draws every series that has points, with a dashed zero line
// when zero is set; nil when no series has any.
func linePanel(title, xlabel, ylabel string, lines []line, scale yScale, zero bool) (*plot.Plot, error) {
	p := newPanel(title, xlabel, ylabel)
	p.X.Tick.Marker = integerTicks
	xmin, xmax := math.Inf(1), math.Inf(-1)
	n := 0
	for i, l := range lines {
		if len(l.xs) == 0 {
			continue
		}
		xy := make(plotter.XYs, len(l.xs))
		for j := range l.xs {
			xy[j] = plotter.XY{X: l.xs[j], Y: l.ys[j]}
			xmin, xmax = math.Min(xmin, l.xs[j]), math.Max(xmax, l.xs[j])
		}
		ln, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", title, err)
		}
		ln.Color = plotutil.Color(i)
		ln.Width = vg.Points(1.5)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(ln, pts)
		if len(lines) > 1 {
			p.Legend.Add(l.name, ln, pts)
		}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	p.X.Min, p.X.Max = xmin-0.5, xmax+0.5
	if zero {
		z, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: 0}, {X: p.X.Max, Y: 0}})
		if err != nil {
			return nil, err
		}
		z.Color, z.Dashes = gray, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(z)
		p.Y.Min, p.Y.Max = math.Min(p.Y.Min, 0), math.Max(p.Y.Max, 0)
	}
	if scale == scaleRate {
		pinRate(p)
	} else {
		fitData(p)
	}
	if n > 1 {
		headroom(p)
	}
	return p, nil
}

// fitData brings 0 into the y range of a panel on the data's own scale
// when the data's span is under half their largest magnitude. Such a
// range would magnify the change more than twofold (a gap of 0.00026
// against 0.00028 filling the height); from 0 to 1.1 times the far end,
// the height shows the size and the change together. A wider span keeps
// the data's range, which is then under two times zoomed.
func fitData(p *plot.Plot) {
	lo, hi := p.Y.Min, p.Y.Max
	mag := math.Max(math.Abs(lo), math.Abs(hi))
	if mag == 0 || hi-lo >= mag/2 {
		return
	}
	if hi > 0 {
		p.Y.Min, p.Y.Max = math.Min(lo, 0), 1.1*hi
	} else {
		p.Y.Min, p.Y.Max = 1.1*lo, 0
	}
}

// pinRate sets a rate panel's y axis to [0, 1], widened only by data
// outside it, which a fixed axis must not hide. Ticks stop at the data's
// top, so the band headroom may add above it reads as the legend's.
func pinRate(p *plot.Plot) {
	p.Y.Min, p.Y.Max = math.Min(p.Y.Min, 0), math.Max(p.Y.Max, 1)
	top := p.Y.Max
	p.Y.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		return plot.DefaultTicks{}.Ticks(lo, math.Min(hi, top))
	})
}

// barPanel draws grouped bars, one group per series, side by side in
// each category; nil when there are no categories. A NaN or infinite
// value is a category the series has no value for: it is labelled
// "n/a", where a zero gets a stub at 0 and the label "0" (see barMarks).
func barPanel(title, xlabel, ylabel string, cats []string, groups []group, scale yScale) (*plot.Plot, error) {
	if len(cats) == 0 || len(groups) == 0 {
		return nil, nil
	}
	p := newPanel(title, xlabel, ylabel)
	slot := float64(panelWidth-vg.Inch) / float64(len(cats))
	w := vg.Length(math.Max(2, math.Min(28, 0.8*slot/float64(len(groups)))))
	var marks []*barMarks
	for j, g := range groups {
		vals := make(plotter.Values, len(cats))
		m := &barMarks{values: make([]float64, len(cats)), width: w, color: plotutil.Color(j), style: p.Y.Tick.Label}
		for i := range cats {
			m.values[i] = math.NaN()
			if i < len(g.values) && !math.IsNaN(g.values[i]) && !math.IsInf(g.values[i], 0) {
				vals[i], m.values[i] = g.values[i], g.values[i]
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", title, err)
		}
		b.Color = plotutil.Color(j)
		b.LineStyle.Width = 0
		b.Offset = vg.Length(float64(j)-float64(len(groups)-1)/2) * w
		m.offset = b.Offset
		p.Add(b)
		marks = append(marks, m)
		if len(groups) > 1 {
			p.Legend.Add(g.name, b)
		}
	}
	// Drawn after every bar, so no neighbour covers a label.
	for _, m := range marks {
		p.Add(m)
	}
	p.NominalX(cats...)
	p.X.Min, p.X.Max = -0.5, float64(len(cats))-0.5
	p.Y.Min = math.Min(p.Y.Min, 0)
	if scale == scaleRate {
		pinRate(p)
	}
	if len(groups) > 1 {
		headroom(p)
	}
	return p, nil
}

// barMarks shows what a bar of height zero cannot: a stub in the bar's
// colour along 0 and the label "0" for a zero, the label "n/a" in gray
// and no stub for a missing value, so a zero and a gap differ on sight.
type barMarks struct {
	values        []float64 // per category; NaN: no value
	offset, width vg.Length
	color         color.Color
	style         text.Style
}

// zeroStub is the height of the stub drawn for a zero bar; markSize the
// font size of the labels barMarks writes.
const (
	zeroStub vg.Length = 2.5
	markSize vg.Length = 7
)

func (m *barMarks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := m.style
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YBottom
	sty.Font.Size = markSize
	y0 := trY(0)
	for i, v := range m.values {
		x := trX(float64(i)) + m.offset
		switch {
		case math.IsNaN(v):
			s := sty
			s.Color = gray
			c.FillText(s, vg.Point{X: x, Y: y0 + vg.Points(2)}, "n/a")
		case v == 0:
			c.FillPolygon(m.color, []vg.Point{{X: x - m.width/2, Y: y0}, {X: x + m.width/2, Y: y0},
				{X: x + m.width/2, Y: y0 + zeroStub}, {X: x - m.width/2, Y: y0 + zeroStub}})
			c.FillText(sty, vg.Point{X: x, Y: y0 + zeroStub + vg.Points(1)}, "0")
		}
	}
}

// headroom raises the top of the y axis so the legend, drawn in the top
// right corner, does not cover the data.
func headroom(p *plot.Plot) {
	if span := p.Y.Max - p.Y.Min; span > 0 {
		p.Y.Max += 0.3 * span
	}
}

// histPanel counts whole-number values (turns per attempt) into at most
// 20 bins of equal width; nil without values.
func histPanel(title, xlabel string, values []int) *plot.Plot {
	if len(values) == 0 {
		return nil
	}
	lo, hi := values[0], values[0]
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
	}
	width := max(1, (hi-lo+20)/20)
	bins := make([]plotter.HistogramBin, (hi-lo)/width+1)
	for i := range bins {
		bins[i].Min = float64(lo+i*width) - 0.5
		bins[i].Max = bins[i].Min + float64(width)
	}
	for _, v := range values {
		bins[(v-lo)/width].Weight++
	}
	p := newPanel(title, xlabel, "attempts")
	p.X.Tick.Marker, p.Y.Tick.Marker = integerTicks, integerTicks
	h := &plotter.Histogram{Bins: bins, Width: float64(width), FillColor: plotutil.Color(0), LineStyle: plotter.DefaultLineStyle}
	h.LineStyle.Color = color.White
	p.Add(h)
	p.X.Min, p.X.Max = bins[0].Min-1, bins[len(bins)-1].Max+1
	return p
}

// renderSVG draws panels side by side as one SVG element (no XML prolog,
// so it can sit inside HTML). A panic inside the plotting library becomes
// an error naming the figure.
func renderSVG(name string, panels []*plot.Plot) (svg []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("report: plot %s: %v", name, p)
		}
	}()
	c := vgsvg.New(panelWidth*vg.Length(len(panels)), panelHeight)
	dc := draw.New(c)
	if len(panels) == 1 {
		panels[0].Draw(dc)
	} else {
		tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Points(18), PadTop: vg.Points(4), PadBottom: vg.Points(4),
			PadLeft: vg.Points(4), PadRight: vg.Points(4)}
		canvases := plot.Align([][]*plot.Plot{panels}, tiles, dc)
		for i, p := range panels {
			p.Draw(canvases[0][i])
		}
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("report: plot %s: %w", name, err)
	}
	out := buf.Bytes()
	if i := bytes.Index(out, []byte("<svg")); i >= 0 {
		out = out[i:]
	}
	return out, nil
}
