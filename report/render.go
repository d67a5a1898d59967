package report

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"strings"
)

// Render writes the Markdown and the HTML report of runs[0], with
// runs[1:] shown side by side as variants (ablations) when present. The
// HTML is one self-contained page: styles inline, plots as inline SVG,
// nothing fetched. The same runs always render to the same bytes: the
// only times shown are the runs' own, and every list has a fixed order.
// Plots without data render as a "no data" note. Rates and fractions
// are drawn on a fixed 0–1 axis, other quantities from 0 when their
// change is small against their size, and a zero bar as a stub labelled
// "0", unlike a missing one ("n/a").
func Render(runs []*Run) (markdown, html []byte, err error) {
	if len(runs) == 0 {
		return nil, nil, errors.New("report: no run to render")
	}
	for i, r := range runs {
		if r == nil {
			return nil, nil, fmt.Errorf("report: run %d is nil", i)
		}
	}
	d, err := build(runs)
	if err != nil {
		return nil, nil, err
	}
	html, err = d.html()
	if err != nil {
		return nil, nil, err
	}
	return d.markdown(), html, nil
}

// markdown shows the text and tables; the plots are in the HTML.
func (d *document) markdown() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\nStatus: **%s**%s\n\nPlots: report.html, beside this file.\n", mdEscape(d.title), d.status, mdEscape(d.summary))
	for _, s := range d.sections {
		fmt.Fprintf(&b, "\n## %s\n", s.title)
		for _, bl := range s.blocks {
			switch {
			case bl.text != "":
				fmt.Fprintf(&b, "\n%s\n", mdEscape(bl.text))
			case bl.table != nil:
				t := bl.table
				if t.caption != "" {
					fmt.Fprintf(&b, "\n**%s**\n", mdEscape(t.caption))
				}
				b.WriteString("\n|")
				for _, h := range t.head {
					fmt.Fprintf(&b, " %s |", mdCell(h))
				}
				b.WriteString("\n|")
				for range t.head {
					b.WriteString("---|")
				}
				b.WriteString("\n")
				for _, row := range t.rows {
					b.WriteString("|")
					for _, c := range row {
						fmt.Fprintf(&b, " %s |", mdCell(c))
					}
					b.WriteString("\n")
				}
			}
		}
	}
	return []byte(b.String())
}

// mdEscape keeps run-supplied text (ids, reasons) from becoming markup.
func mdEscape(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}

func mdCell(s string) string {
	if s == "" {
		return " "
	}
	return strings.ReplaceAll(mdEscape(s), "|", `\|`)
}

//go:embed report.html.tmpl
var pageSource string

var page = template.Must(template.New("report").Parse(pageSource))

type htmlPage struct {
	Title, Status, Summary string
	Sections               []htmlSection
}

type htmlSection struct {
	ID, Title string
	Blocks    []htmlBlock
}

type htmlBlock struct {
	Text   string
	Table  *table
	Figure *htmlFigure
}

type htmlFigure struct {
	ID, Title string
	SVG       template.HTML
}

// Caption, Head and Rows expose a table to the template.
func (t *table) Caption() string  { return t.caption }
func (t *table) Head() []string   { return t.head }
func (t *table) Rows() [][]string { return t.rows }

func (d *document) html() ([]byte, error) {
	pg := htmlPage{Title: d.title, Status: d.status, Summary: d.summary}
	for _, s := range d.sections {
		hs := htmlSection{ID: s.id, Title: s.title}
		for _, bl := range s.blocks {
			hb := htmlBlock{Text: bl.text, Table: bl.table}
			if f := bl.figure; f != nil {
				hf := &htmlFigure{ID: f.id, Title: f.title}
				if len(f.panels) > 0 {
					svg, err := renderSVG(f.id, f.panels)
					if err != nil {
						return nil, err
					}
					// The SVG comes from the plotting library, which escapes
					// every text it draws.
					hf.SVG = template.HTML(svg)
				}
				hb.Figure = hf
			}
			hs.Blocks = append(hs.Blocks, hb)
		}
		pg.Sections = append(pg.Sections, hs)
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, pg); err != nil {
		return nil, fmt.Errorf("report: html: %w", err)
	}
	return buf.Bytes(), nil
}
