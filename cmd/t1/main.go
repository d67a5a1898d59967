// Command t1 runs and inspects the t1 pipeline. It parses the command
// line and formats what it prints; the work lives in the packages it
// calls, which mark their errors with the exit code they call for (exit).
package main

import (
	"context"
	"fmt"
	"github.com/t1pipe/t1/infra/s3/gateway"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/buildinfo"
	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/jsonout"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/usage"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

type globals struct {
	configPath string
	setup      string
	dataDir    string
	json       bool
	logLevel   string
	unisolated bool
}

func main() {
	gateway.ServeChild() // this executable serves the embedded object store (package embedded)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	err := root.ExecuteContext(ctx)
	hostres.Exit() // what an error path or a signal left goes with the process
	if err != nil {
		code := exit.Code(ctx, err)
		usage.PrintError(os.Stderr, err, code, usage.WantsJSON(root, os.Args[1:]))
		os.Exit(code)
	}
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "t1",
		Short:         "Event-sourced RL post-training pipeline for terminal agents",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exit.With(exit.Config, err) })
	pf := root.PersistentFlags()
	pf.StringVar(&g.configPath, "config", "", "pipeline configuration (default: $T1_CONFIG, else ./pipeline.yaml if present, else built-in defaults)")
	pf.StringVar(&g.setup, "setup", "", "run the configuration's setup of this name (setups: in the file) instead of its own configuration")
	pf.StringVar(&g.dataDir, "data", "", "data directory for embedded NATS and S3 (default: $T1_DATA, else the config's data, .t1)")
	pf.BoolVar(&g.json, "json", false, "print machine-readable JSON")
	pf.StringVar(&g.logLevel, "log-level", "", "debug, info, warn or error (default: the config's log_level)")
	pf.BoolVar(&g.unisolated, "allow-unisolated", false, "allow sandboxes that isolate nothing (backend process), as sandbox.allow_unisolated does")
	root.AddCommand(versionCmd(g), configCmd(g), infraCmd(g), statusCmd(g), eventsCmd(g), runCmd(g), ablateCmd(g),
		demoCmd(g), replayCmd(g), runsCmd(g), workerCmd(g), evalCmd(g), queryCmd(g), reportCmd(g), inspectCmd(g),
		tasksCmd(g), servePolicyCmd(g), moeCmd(g), sandboxCmd(g), imageCmd(g), rolloutCmd(g), exportCmd(g),
		digestCmd(g), poolCmd(g), chatCmd(g), tokenizerCmd(g), uiCmd(g))
	usage.Apply(root)
	return root
}

type runFunc = func(cmd *cobra.Command, args []string) error

// leaf is a command that does something; long may be empty.
func leaf(use, short, long string, args cobra.PositionalArgs, run runFunc) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Long: long, Args: args, RunE: run}
}

// group is a command that only holds others.
func group(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long}
	c.AddCommand(subs...)
	return c
}

// load resolves the configuration and applies flag and environment
// overrides, then sets up logging. Its errors are configuration errors
// (exit 2).
func (g *globals) load() (config.Config, error) {
	cfg, level, err := config.Resolve(config.Overrides{Path: g.configPath, Setup: g.setup, Data: g.dataDir, LogLevel: g.logLevel, AllowUnisolated: g.unisolated})
	if err != nil {
		return cfg, exit.With(exit.Config, err)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	return cfg, nil
}

// configured runs check on the command line first, when there is one, so
// that a missing flag is reported before a bad configuration, then run on
// the configuration.
func (g *globals) configured(check func() error, run func(*cobra.Command, []string, config.Config) error) runFunc {
	return func(cmd *cobra.Command, args []string) error {
		if check != nil {
			if err := check(); err != nil {
				return err
			}
		}
		cfg, err := g.load()
		if err != nil {
			return err
		}
		return run(cmd, args, cfg)
	}
}

// required is a check that the flag named was given.
func required(flag string, value *string) func() error {
	return func() error {
		if *value == "" {
			return exit.Configf("%s is required", flag)
		}
		return nil
	}
}

// infra runs fn on the configuration's bus and store (or the process that
// serves them), brought up as opts asks and closed after.
func (g *globals) infra(cmd *cobra.Command, opts local.Options, outage bool, fn func(*local.Infra) error) error {
	cfg, err := g.load()
	if err != nil {
		return err
	}
	return withInfra(cmd, cfg, opts, outage, fn)
}

// withInfra is infra of a configuration already loaded. With outage, a
// failure to reach the bus or store is the infrastructure's (exit 3): so
// the commands that run and watch runs report it, for their callers to
// retry.
func withInfra(cmd *cobra.Command, cfg config.Config, opts local.Options, outage bool, fn func(*local.Infra) error) error {
	in, err := local.Open(cmd.Context(), cfg, opts)
	if outage {
		err = exit.InfraError(err)
	}
	if err != nil {
		return err
	}
	defer in.Close()
	return fn(in)
}

func printJSON(cmd *cobra.Command, v any) error { return jsonout.Write(cmd.OutOrStdout(), v) }

// emit prints v as JSON with --json, else as text writes it.
func (g *globals) emit(cmd *cobra.Command, v any, text func(io.Writer) error) error {
	if g.json {
		return printJSON(cmd, v)
	}
	return text(cmd.OutOrStdout())
}

// show is emit of what err came with, written as its own WriteText does.
func (g *globals) show(cmd *cobra.Command, v any, err error) error {
	if err != nil {
		return err
	}
	return g.emit(cmd, v, func(w io.Writer) error {
		switch t := v.(type) {
		case interface{ WriteText(io.Writer) error }:
			return t.WriteText(w)
		case interface{ WriteText(io.Writer) }:
			t.WriteText(w)
			return nil
		}
		return fmt.Errorf("%T has no text form", v)
	})
}

// plain adapts a writer that cannot fail to emit.
func plain(write func(io.Writer)) func(io.Writer) error {
	return func(w io.Writer) error { write(w); return nil }
}

func versionCmd(g *globals) *cobra.Command {
	return leaf("version", "Print the t1 version", "", cobra.NoArgs, func(cmd *cobra.Command, _ []string) error {
		return g.show(cmd, buildinfo.Of(version), nil)
	})
}

func configCmd(g *globals) *cobra.Command {
	return group("config", "The pipeline configuration", "",
		leaf("defaults", "Print the built-in configuration as YAML (--json: as JSON)", config.DefaultsHelp, cobra.NoArgs, func(cmd *cobra.Command, _ []string) error {
			out, err := config.Default().YAML()
			if g.json {
				out, err = config.Default().JSON()
			}
			if err == nil {
				_, err = cmd.OutOrStdout().Write(out)
			}
			return err
		}))
}

func infraCmd(g *globals) *cobra.Command {
	return group("infra", "Run the embedded infrastructure", "",
		leaf("up", "Run embedded NATS JetStream and S3 in the foreground until interrupted", local.ServeHelp, cobra.NoArgs, func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{Serve: true}, true, func(in *local.Infra) error {
				if !in.Owner && (in.Config.Bus.Mode == "embedded" || in.Config.Store.Mode == "embedded") {
					return fmt.Errorf("data directory %s is already served by process %d", in.DataDir, in.Endpoints.PID)
				}
				if err := g.emit(cmd, in.Endpoints, plain(in.WriteEndpoints)); err != nil {
					return err
				}
				<-cmd.Context().Done()
				return nil
			})
		}))
}
