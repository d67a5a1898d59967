package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/digest"
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
			return g.infra(cmd, local.Options{NoStore: true}, true, func(in *local.Infra) error {
				st, err := in.Log.Status(cmd.Context())
				if err != nil {
					return err
				}
				rep := struct {
					NATS string `json:"nats"`
					engine.Status
				}{in.Endpoints.NATS, st}
				return g.emit(cmd, rep, func(w io.Writer) { st.WriteText(w, rep.NATS) })
			})
		},
	}
}

func runsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "runs",
		Short: "List every run of the log: status, parent and branch point, iterations, policy versions, last event",
		Long:  report.RunsHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{NoStore: true}, true, func(in *local.Infra) error {
				runs, err := report.Runs(cmd.Context(), in.Log)
				if err != nil {
					return err
				}
				return g.emitErr(cmd, runs, func(w io.Writer) error { return report.WriteRuns(w, runs) })
			})
		},
	}
}

func queryCmd(g *globals) *cobra.Command {
	var o query.Options
	var where, sel string
	cmd := &cobra.Command{
		Use:   "query TABLE --run RUN",
		Short: "Filter and print rows of a run's Parquet table (arrow-go reader)",
		Long:  query.Help,
		Args:  cobra.ExactArgs(1),
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
			return g.infra(cmd, local.Options{}, true, func(in *local.Infra) error {
				return query.Run(cmd.Context(), in.Store, tbl, o, cmd.OutOrStdout())
			})
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
		Long:  report.Help,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return fmt.Errorf("report: --run is required")
			}
			return g.infra(cmd, local.Options{}, false, func(in *local.Infra) error {
				files, err := execute.Report(cmd.Context(), in, append([]string{run}, compare...), out)
				if err != nil {
					return err
				}
				return g.emit(cmd, files, files.WriteText)
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
		Long:  schemas.InspectHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			data, err := os.ReadFile(name)
			if os.IsNotExist(err) {
				err = g.infra(cmd, local.Options{}, false, func(in *local.Infra) error {
					rc, _, err := in.Store.Get(cmd.Context(), name)
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

func poolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "pool", Short: "The sealed training pool of a run"}
	var run string
	var version int
	show := &cobra.Command{
		Use:   "show --run R [--version N]",
		Short: "A sealed pool's tasks with category and difficulty histograms and the top-five category share",
		Long:  report.PoolHelp,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return fmt.Errorf("--run is required")
			}
			return g.infra(cmd, local.Options{}, true, func(in *local.Infra) error {
				sum, err := report.ReadPool(cmd.Context(), in.Log, in.Store, run, version)
				if err != nil {
					return err
				}
				return g.emit(cmd, sum, sum.WriteText)
			})
		},
	}
	show.Flags().StringVar(&run, "run", "", "run id")
	show.Flags().IntVar(&version, "version", 0, "pool version (default: the latest sealed)")
	cmd.AddCommand(show)
	return cmd
}

func digestCmd(g *globals) *cobra.Command {
	var run string
	cmd := &cobra.Command{
		Use:   "digest --run R",
		Short: "Fingerprint a run's artifacts: per-table row hashes, event ids and objects, without wall-clock columns",
		Long:  digest.Help(),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return fmt.Errorf("--run is required")
			}
			return g.infra(cmd, local.Options{}, true, func(in *local.Infra) error {
				d, err := digest.Compute(cmd.Context(), in.Log, in.Store, run)
				if err != nil {
					return err
				}
				return g.emitErr(cmd, d, d.WriteText)
			})
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "run id")
	return cmd
}
