package main

import (
	"cmp"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/digest"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/execute"
	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/query"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/ui"
)

func statusCmd(g *globals) *cobra.Command {
	return leaf("status", "Show streams, stage consumers, dead letters and event counts per run and type", "", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{NoStore: true}, true, func(in *local.Infra) error {
				st, err := in.Status(cmd.Context())
				return g.show(cmd, st, err)
			})
		})
}

type eventsFlags struct {
	run, typ string
	fromSeq  uint64
	limit    int
}

func (f *eventsFlags) bind(c *cobra.Command) *cobra.Command {
	c.Flags().StringVar(&f.run, "run", "", "only this run (default: every run)")
	c.Flags().StringVar(&f.typ, "type", "", "only this event type, e.g. task.audited (default: every type)")
	c.Flags().Uint64Var(&f.fromSeq, "from-seq", 0, "start at this stream sequence")
	return c
}

func eventsCmd(g *globals) *cobra.Command {
	var lf, tf eventsFlags
	// events runs read on the log, with a writer of the events it reads.
	events := func(f *eventsFlags, read func(ctx context.Context, l *engine.Log, write func(engine.Event) error) error) runFunc {
		return func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{NoStore: true}, false, func(in *local.Infra) error {
				if err := known.Events(cmd.Context(), in.Log, f.run, f.typ); err != nil {
					return err
				}
				return read(cmd.Context(), in.Log, func(ev engine.Event) error { return engine.WriteEvent(cmd.OutOrStdout(), ev, g.json) })
			})
		}
	}
	list := leaf("list", "Print matching events from the log, one JSON object a line with --json", "", cobra.NoArgs, events(&lf, func(ctx context.Context, l *engine.Log, write func(engine.Event) error) error {
		return l.List(ctx, engine.Filter(lf.run, lf.typ), lf.fromSeq, lf.limit, write)
	}))
	lf.bind(list).Flags().IntVar(&lf.limit, "limit", 0, "print at most this many (0: all)")
	tail := leaf("tail", "Print new matching events as they arrive, until interrupted", "", cobra.NoArgs, events(&tf, func(ctx context.Context, l *engine.Log, write func(engine.Event) error) error {
		return l.Tail(ctx, engine.Filter(tf.run, tf.typ), tf.fromSeq, write)
	}))
	return group("events", "List or follow events in the log", "", list, tf.bind(tail))
}

func runsCmd(g *globals) *cobra.Command {
	return leaf("runs", "List every run of the log: status, parent and branch point, iterations, policy versions, last event", report.RunsHelp, cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{NoStore: true}, true, func(in *local.Infra) error {
				runs, err := report.Runs(cmd.Context(), in.Log)
				return g.show(cmd, report.RunList(runs), err)
			})
		})
}

func queryCmd(g *globals) *cobra.Command {
	var o query.Options
	var where, sel string
	cmd := leaf("query TABLE --run RUN", "Filter and print rows of a run's Parquet table (arrow-go reader)", query.Help, cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string) error {
			if g.json && !cmd.Flags().Changed("format") {
				o.Format = "json"
			}
			tbl, err := query.LookupTable(args[0])
			if err := cmp.Or(err, o.Parse(where, sel)); err != nil {
				return err
			}
			return g.infra(cmd, local.Options{}, true, func(in *local.Infra) error {
				if err := known.Run(cmd.Context(), in.Log, in.Store, o.Run); err != nil {
					return err
				}
				return query.Run(cmd.Context(), in.Store, tbl, o, cmd.OutOrStdout())
			})
		})
	f := cmd.Flags()
	f.StringVar(&o.Run, "run", "", "run id (required)")
	f.StringVar(&where, "where", "", "row filter, e.g. \"reward > 0 AND purpose = 'train'\"")
	f.StringVar(&sel, "select", "", "comma-separated columns to print (default: all)")
	f.Int64Var(&o.Limit, "limit", 0, "print at most N rows (0: all)")
	f.StringVar(&o.Format, "format", "table", "table, csv, json (one array; the default with --json), ndjson (one object a line) or arrow (IPC stream)")
	return cmd
}

func reportCmd(g *globals) *cobra.Command {
	var run, out string
	var compare []string
	cmd := leaf("report --run R [--compare R2,R3...] [--out DIR]", "Write a run's report: Markdown, and one self-contained HTML page with plots", report.Help, cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{}, false, func(in *local.Infra) error {
				if err := known.Run(cmd.Context(), in.Log, in.Store, append([]string{run}, compare...)...); err != nil {
					return err
				}
				files, err := execute.Report(cmd.Context(), in, append([]string{run}, compare...), out)
				return g.show(cmd, files, err)
			})
		})
	f := cmd.Flags()
	f.StringVar(&run, "run", "", "run id (required)")
	f.StringSliceVar(&compare, "compare", nil, "runs to show beside it as variants, comma-separated")
	f.StringVar(&out, "out", "", "directory for report.md and report.html (default: <data>/runs/<run>)")
	return cmd
}

func inspectCmd(g *globals) *cobra.Command {
	return leaf("inspect FILE|KEY", "Show a Parquet file's schema, metadata, row groups and column chunks", schemas.InspectHelp, cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string) error {
			rep, err := execute.Inspect(cmd.Context(), args[0], func(fn func(*local.Infra) error) error { return g.infra(cmd, local.Options{}, false, fn) })
			return g.show(cmd, rep, err)
		})
}

func uiCmd(g *globals) *cobra.Command {
	var run, addr string
	cmd := leaf("ui [--run R] [--addr HOST:PORT]", "Serve a read-only web viewer of the runs: curves, attempts, tokens, routing", ui.Help, cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{}, true, func(in *local.Infra) error {
				return execute.UI(cmd.Context(), in, run, addr, func(url string) { fmt.Fprintln(cmd.OutOrStdout(), "t1 ui serving on", url) })
			})
		})
	cmd.Flags().StringVar(&run, "run", "", "open this run (default: the list of runs)")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:7117", "listen address; loopback unless you mean to share it (port 0 picks a free one)")
	return cmd
}

func poolCmd(g *globals) *cobra.Command {
	var run string
	var version int
	show := leaf("show --run R [--version N]", "A sealed pool's tasks with category and difficulty histograms and the top-five category share", report.PoolHelp, cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{}, true, func(in *local.Infra) error {
				if err := known.Run(cmd.Context(), in.Log, in.Store, run); err != nil {
					return err
				}
				sum, err := report.ReadPool(cmd.Context(), in.Log, in.Store, run, version)
				return g.show(cmd, sum, err)
			})
		})
	show.Flags().StringVar(&run, "run", "", "run id")
	show.Flags().IntVar(&version, "version", 0, "pool version (default: the latest sealed)")
	return group("pool", "The sealed training pool of a run", "", show)
}

func digestCmd(g *globals) *cobra.Command {
	var run string
	cmd := leaf("digest --run R", "Fingerprint a run's artifacts: per-table row hashes, event ids and objects, without wall-clock columns", digest.Help(), cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{}, true, func(in *local.Infra) error {
				if err := known.Run(cmd.Context(), in.Log, in.Store, run); err != nil {
					return err
				}
				d, err := digest.Compute(cmd.Context(), in.Log, in.Store, run)
				return g.show(cmd, d, err)
			})
		})
	cmd.Flags().StringVar(&run, "run", "", "run id")
	return cmd
}
