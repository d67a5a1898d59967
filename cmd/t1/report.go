package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/report"
)

// reportFiles are where a run's report was written and stored.
type reportFiles struct {
	Report    string `json:"report"`
	ReportKey string `json:"report_key"`
	HTML      string `json:"report_html"`
	HTMLKey   string `json:"report_html_key"`
}

func reportCmd(g *globals) *cobra.Command {
	var run, out string
	var compare []string
	cmd := &cobra.Command{
		Use:   "report --run R [--compare R2,R3...] [--out DIR]",
		Short: "Write a run's report: Markdown, and one self-contained HTML page with plots",
		Long: `Reads the run's events and its metrics, trajectories, rewards and eval_results tables and
writes report.md and report.html under <data>/runs/R/ (or --out DIR), and stores both as the
objects runs/R/report.md and runs/R/report.html. The HTML page needs nothing else: open it in
a browser. Runs named with --compare are shown beside R as variants (ablations): a comparison
table, and their per-iteration lines overlaid on R's. Works beside a running ` + "`t1 run`" + ` or
` + "`t1 infra up`" + ` on the same data directory; a run in progress is reported as running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return fmt.Errorf("report: --run is required")
			}
			cfg, err := g.load()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			in, err := local.Open(ctx, cfg, local.Options{})
			if err != nil {
				return err
			}
			defer in.Close()
			var runs []*report.Run
			for _, id := range append([]string{run}, compare...) {
				r, err := report.Load(ctx, in.Log, in.Store, id)
				if err != nil {
					return err
				}
				runs = append(runs, r)
			}
			files, err := saveReport(ctx, in, runs, out)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd, files)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report  %s (object %s)\nhtml    %s (object %s)\n", files.Report, files.ReportKey, files.HTML, files.HTMLKey)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&run, "run", "", "run id (required)")
	f.StringSliceVar(&compare, "compare", nil, "runs to show beside it as variants, comma-separated")
	f.StringVar(&out, "out", "", "directory for report.md and report.html (default: <data>/runs/<run>)")
	return cmd
}

// saveReport renders runs[0]'s report, runs[1:] as its variants, and
// writes report.md and report.html to dir (default <data>/runs/<run>) and
// to the store under runs/<run>/.
func saveReport(ctx context.Context, in *local.Infra, runs []*report.Run, dir string) (reportFiles, error) {
	var f reportFiles
	md, html, err := report.Render(runs)
	if err != nil {
		return f, err
	}
	run := runs[0].ID
	f.ReportKey, f.HTMLKey = keys.Report(run), keys.ReportHTML(run)
	if f.Report, err = writeRunFile(ctx, in, run, dir, f.ReportKey, "text/markdown; charset=utf-8", md); err != nil {
		return f, err
	}
	if f.HTML, err = writeRunFile(ctx, in, run, dir, f.HTMLKey, "text/html; charset=utf-8", html); err != nil {
		return f, err
	}
	return f, nil
}
