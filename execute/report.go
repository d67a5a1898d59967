package execute

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/schemas"
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

// Report loads the runs named by ids from the log and store and saves
// ids[0]'s report, the others as its variants, as SaveReport does.
func Report(ctx context.Context, in *local.Infra, ids []string, dir string) (ReportFiles, error) {
	var runs []*report.Run
	for _, id := range ids {
		r, err := report.Load(ctx, in.Log, in.Store, id)
		if err != nil {
			return ReportFiles{}, err
		}
		runs = append(runs, r)
	}
	return SaveReport(ctx, in, runs, dir)
}

// WriteText says where the report's files went.
func (f ReportFiles) WriteText(w io.Writer) {
	fmt.Fprintf(w, "report  %s (object %s)\nhtml    %s (object %s)\n", f.Report, f.ReportKey, f.HTML, f.HTMLKey)
}

// Inspect is schemas.Inspect of name: a local file, else the object of
// that key in the store withStore opens (only when no such file exists).
func Inspect(ctx context.Context, name string, withStore func(func(*local.Infra) error) error) (*schemas.FileReport, error) {
	data, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		err = withStore(func(in *local.Infra) error {
			rc, _, err := in.Store.Get(ctx, name)
			if err != nil {
				return fmt.Errorf("inspect: %s is neither a local file nor a store object: %w", name, err)
			}
			defer rc.Close()
			if data, err = io.ReadAll(rc); err != nil {
				return fmt.Errorf("inspect: %s: %w", name, err)
			}
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	return schemas.Inspect(name, data)
}
