package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/execute"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/query"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/schemas"
)

func statusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show streams, stage consumers, dead letters and event counts per run and type",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := g.open(cmd.Context(), local.Options{NoStore: true})
			if err != nil {
				return err
			}
			defer in.Close()
			st, err := in.Log.Status(cmd.Context())
			if err != nil {
				return err
			}
			rep := struct {
				NATS string `json:"nats"`
				engine.Status
			}{in.Endpoints.NATS, st}
			return g.emit(cmd, rep, func(out io.Writer) {
				w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
				fmt.Fprintf(w, "NATS %s\n\n", rep.NATS)
				fmt.Fprintln(w, "STREAM\tMESSAGES\tBYTES\tFIRST\tLAST")
				for _, s := range st.Streams {
					fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", s.Name, s.Messages, s.Bytes, s.FirstSeq, s.LastSeq)
				}
				fmt.Fprintln(w, "\nCONSUMER\tPENDING\tACK PENDING\tREDELIVERED\tDELIVERED SEQ")
				for _, c := range st.Consumers {
					fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", c.Name, c.Pending, c.AckPending, c.Redelivered, c.Delivered)
				}
				if len(st.Consumers) == 0 {
					fmt.Fprintln(w, "(none)")
				}
				for _, t := range []struct {
					head string
					rows []engine.EventCount
				}{{"DEAD LETTERS\tTYPE\tCOUNT", st.DeadLetters}, {"FAILED\tTYPE\tCOUNT", st.Failed}, {"RUN\tTYPE\tEVENTS", st.Events}} {
					fmt.Fprintln(w, "\n"+t.head)
					for _, e := range t.rows {
						fmt.Fprintf(w, "%s\t%s\t%d\n", e.Run, e.Type, e.Count)
					}
					if len(t.rows) == 0 {
						fmt.Fprintln(w, "(none)")
					}
				}
				w.Flush()
			})
		},
	}
}

func runsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "runs",
		Short: "List every run of the log: status, parent and branch point, iterations, policy versions, last event",
		Long: `Lists the runs the event log holds, sorted by id. A branch (t1 replay) names its parent and
where it left it: the stage it re-ran, and for a continued branch the iteration it went on from.
Status is completed, failed, running, replayed (a branch that re-ran one stage and nothing
after it) or unstarted (events without run.started). Iterations counts the policy updates of the
run's own, of those its run.started planned; policy versions are those the run made itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := g.open(cmd.Context(), local.Options{NoStore: true})
			if err != nil {
				return err
			}
			defer in.Close()
			runs, err := report.Runs(cmd.Context(), in.Log)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd, runs)
			}
			return report.WriteRuns(cmd.OutOrStdout(), runs)
		},
	}
}

func queryCmd(g *globals) *cobra.Command {
	var o query.Options
	var where, sel string
	cmd := &cobra.Command{
		Use:   "query TABLE --run RUN",
		Short: "Filter and print rows of a run's Parquet table (arrow-go reader)",
		Long: `Reads every object of TABLE under runs/RUN/TABLE/ in the store with arrow-go,
keeps the rows matching --where and the columns named by --select. The
hive partition of each object (iter, round or policy) is a column too.
Objects an older minor version of the schema wrote read with the columns
added since as nulls, so a run that a newer build resumed prints as one
table.

--where takes comparisons of a column with a literal (=, !=, <, <=, >, >=),
combined with AND, OR, NOT and parentheses; strings are quoted:
  t1 query rewards --run r1 --where "reward > 0.5 AND NOT fallback"
  t1 query trajectories --run r1 --where "purpose = 'eval' OR turns >= 100" --select task_id,turns

--format arrow writes an Arrow IPC stream to stdout, e.g. for
pyarrow.ipc.open_stream(sys.stdin.buffer).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tbl, err := schemas.LookupTable(args[0])
			if err != nil {
				return err
			}
			if o.Run == "" {
				return fmt.Errorf("query: --run is required")
			}
			if err := query.CheckFormat(o.Format); err != nil {
				return err
			}
			if where != "" {
				if o.Where, err = query.ParseWhere(where); err != nil {
					return err
				}
			}
			o.Select = query.Columns(sel)
			in, err := g.open(cmd.Context(), local.Options{})
			if err != nil {
				return err
			}
			defer in.Close()
			return query.Run(cmd.Context(), in.Store, tbl, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Run, "run", "", "run id (required)")
	f.StringVar(&where, "where", "", "row filter, e.g. \"reward > 0 AND purpose = 'train'\"")
	f.StringVar(&sel, "select", "", "comma-separated columns to print (default: all)")
	f.Int64Var(&o.Limit, "limit", 0, "print at most N rows (0: all)")
	f.StringVar(&o.Format, "format", "table", "table, csv, json (one object per line) or arrow (IPC stream)")
	return cmd
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
			files, err := execute.SaveReport(ctx, in, runs, out)
			if err != nil {
				return err
			}
			return g.emit(cmd, files, func(w io.Writer) {
				fmt.Fprintf(w, "report  %s (object %s)\nhtml    %s (object %s)\n", files.Report, files.ReportKey, files.HTML, files.HTMLKey)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&run, "run", "", "run id (required)")
	f.StringSliceVar(&compare, "compare", nil, "runs to show beside it as variants, comma-separated")
	f.StringVar(&out, "out", "", "directory for report.md and report.html (default: <data>/runs/<run>)")
	return cmd
}

func inspectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE|KEY",
		Short: "Show a Parquet file's schema, metadata, row groups and column chunks",
		Long: `Inspects a local Parquet file, or, when no such file exists, an object key in the
configured store (e.g. runs/r1/tokens/iter=0001/part-….parquet, as printed by events).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			data, err := os.ReadFile(name)
			if os.IsNotExist(err) {
				data, err = g.fetchObject(cmd, name)
			}
			if err != nil {
				return err
			}
			rep, err := schemas.Inspect(name, data)
			if err != nil {
				return err
			}
			return g.emit(cmd, rep, rep.WriteText)
		},
	}
}

// fetchObject reads an object of the configured store.
func (g *globals) fetchObject(cmd *cobra.Command, key string) ([]byte, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, err
	}
	in, err := local.Open(cmd.Context(), cfg, local.Options{})
	if err != nil {
		return nil, err
	}
	defer in.Close()
	rc, _, err := in.Store.Get(cmd.Context(), key)
	if err != nil {
		return nil, fmt.Errorf("inspect: %s is neither a local file nor a store object: %w", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("inspect: %s: %w", key, err)
	}
	return data, nil
}

func poolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "pool", Short: "The sealed training pool of a run"}
	var run string
	var version int
	show := &cobra.Command{
		Use:   "show --run R [--version N]",
		Short: "A sealed pool's tasks with category and difficulty histograms and the top-five category share",
		Long: `Reads the run's pool.sealed event (the latest version unless --version is given) and the
tasks-table rows it claims, and prints the pool's size, the accepted tasks sealing dropped as
near-duplicates of another, histograms by category and by difficulty, the share of the pool held by its five
largest categories (1.0 means at most five categories: a narrow pool), and every task.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return fmt.Errorf("--run is required")
			}
			in, err := g.open(cmd.Context(), local.Options{})
			if err != nil {
				return err
			}
			defer in.Close()
			sum, err := report.ReadPool(cmd.Context(), in.Log, in.Store, run, version)
			if err != nil {
				return err
			}
			return g.emit(cmd, sum, sum.WriteText)
		},
	}
	show.Flags().StringVar(&run, "run", "", "run id")
	show.Flags().IntVar(&version, "version", 0, "pool version (default: the latest sealed)")
	cmd.AddCommand(show)
	return cmd
}
