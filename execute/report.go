package execute

import (
	"context"

	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/report"
)

// ReportFiles are where a run's report was written and stored.
type ReportFiles struct {
	Report    string `json:"report"`
	ReportKey string `json:"report_key"`
	HTML      string `json:"report_html"`
	HTMLKey   string `json:"report_html_key"`
}

// SaveReport renders runs[0]'s report, runs[1:] as its variants, and
// writes report.md and report.html to dir (default <data>/runs/<run>) and
// to the store under runs/<run>/.
func SaveReport(ctx context.Context, in *local.Infra, runs []*report.Run, dir string) (ReportFiles, error) {
	var f ReportFiles
	md, html, err := report.Render(runs)
	if err != nil {
		return f, err
	}
	run := runs[0].ID
	f.ReportKey, f.HTMLKey = keys.Report(run), keys.ReportHTML(run)
	if f.Report, err = in.WriteRunFile(ctx, run, dir, f.ReportKey, "text/markdown; charset=utf-8", md); err != nil {
		return f, err
	}
	if f.HTML, err = in.WriteRunFile(ctx, run, dir, f.HTMLKey, "text/html; charset=utf-8", html); err != nil {
		return f, err
	}
	return f, nil
}
