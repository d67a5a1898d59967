// Command t1 runs and inspects the t1 pipeline. It parses the command
// line and formats what it prints; the work lives in the packages it
// calls, which mark their errors with the exit code they call for (exit).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/local"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "t1: "+exit.Line(err))
		os.Exit(exit.Code(ctx, err))
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
	root.AddCommand(
		versionCmd(g),
		configCmd(g),
		infraCmd(g),
		statusCmd(g),
		eventsCmd(g),
		runCmd(g),
		ablateCmd(g),
		demoCmd(g),
		replayCmd(g),
		runsCmd(g),
		workerCmd(g),
		evalCmd(g),
		queryCmd(g),
		reportCmd(g),
		inspectCmd(g),
		tasksCmd(g),
		servePolicyCmd(g),
		moeCmd(g),
		sandboxCmd(g),
		imageCmd(g),
		rolloutCmd(g),
		exportCmd(g),
		digestCmd(g),
		poolCmd(g),
		chatCmd(g),
		tokenizerCmd(g),
	)
	return root
}

// open resolves the configuration and brings up what opts asks of its
// bus and store (or connects to the process that serves them).
func (g *globals) open(ctx context.Context, opts local.Options) (*local.Infra, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, err
	}
	return connect(ctx, cfg, opts)
}

// connect is local.Open whose failures are the infrastructure's (exit 3).
func connect(ctx context.Context, cfg config.Config, opts local.Options) (*local.Infra, error) {
	in, err := local.Open(ctx, cfg, opts)
	return in, exit.InfraError(err)
}

// load resolves the configuration and applies flag and environment
// overrides, then sets up logging. Its errors are configuration errors
// (exit 2).
func (g *globals) load() (config.Config, error) {
	cfg, err := g.loadConfig()
	return cfg, exit.With(exit.Config, err)
}

func (g *globals) loadConfig() (config.Config, error) {
	path := g.configPath
	if path == "" {
		path = os.Getenv("T1_CONFIG")
	}
	if path == "" {
		if _, err := os.Stat("pipeline.yaml"); err == nil {
			path = "pipeline.yaml"
		}
	}
	cfg := config.Default()
	if path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return cfg, err
		}
	}
	if g.setup != "" {
		var err error
		if cfg, err = cfg.Setup(g.setup); err != nil {
			return cfg, fmt.Errorf("%s: %w", cmp.Or(path, "built-in configuration"), err)
		}
	}
	if d := os.Getenv("T1_DATA"); d != "" {
		cfg.Data = d
	}
	if g.dataDir != "" {
		cfg.Data = g.dataDir
	}
	if g.unisolated {
		cfg.Sandbox.AllowUnisolated = true
	}
	if g.logLevel != "" {
		cfg.LogLevel = g.logLevel
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return cfg, fmt.Errorf("log level %q: want debug, info, warn or error", cfg.LogLevel)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	return cfg, nil
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if dirty {
				rev += "-dirty"
			}
			return "dev-" + rev
		}
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
	}
	return "dev"
}

func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the t1 version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.json {
				return printJSON(cmd, map[string]string{"version": buildVersion(), "go": goVersion()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "t1 %s (%s)\n", buildVersion(), goVersion())
			return nil
		},
	}
}

// configName names where the configuration came from.
func (g *globals) configName() string {
	if g.configPath != "" {
		return g.configPath
	}
	return "the configuration"
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// emit prints v as JSON with --json, else as text writes it.
func (g *globals) emit(cmd *cobra.Command, v any, text func(io.Writer)) error {
	if g.json {
		return printJSON(cmd, v)
	}
	text(cmd.OutOrStdout())
	return nil
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "unknown"
}

func configCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "The pipeline configuration"}
	cmd.AddCommand(&cobra.Command{
		Use:   "defaults",
		Short: "Print the built-in configuration as YAML (--json: as JSON)",
		Long: `Prints the built-in configuration, every key with its default value: what a
run uses for each key its pipeline.yaml leaves out. pipeline.yaml at the
repository root spells out the same values with comments.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := config.Default()
			out, err := c.YAML()
			if g.json {
				out, err = c.JSON()
			}
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	})
	return cmd
}

func infraCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "infra", Short: "Run the embedded infrastructure"}
	cmd.AddCommand(&cobra.Command{
		Use:   "up",
		Short: "Run embedded NATS JetStream and S3 in the foreground until interrupted",
		Long: "Runs the embedded servers on the data directory and prints their endpoints, which are also\n" +
			"written to <data>/endpoints.json for other t1 processes and the nats CLI.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := g.open(cmd.Context(), local.Options{Serve: true})
			if err != nil {
				return err
			}
			defer in.Close()
			if !in.Owner && (in.Config.Bus.Mode == "embedded" || in.Config.Store.Mode == "embedded") {
				return fmt.Errorf("data directory %s is already served by process %d", in.DataDir, in.Endpoints.PID)
			}
			err = g.emit(cmd, in.Endpoints, func(out io.Writer) {
				fmt.Fprintf(out, "nats:   %s\n", in.Endpoints.NATS)
				fmt.Fprintf(out, "s3:     http://%s  bucket %s  credentials %s\n", in.Endpoints.S3, in.Endpoints.Bucket, in.Endpoints.Credentials)
				fmt.Fprintf(out, "data:   %s  (endpoints in %s)\n", in.DataDir, local.EndpointsPath(in.DataDir))
				fmt.Fprintln(out, "serving; Ctrl-C stops")
			})
			if err != nil {
				return err
			}
			<-cmd.Context().Done()
			return nil
		},
	})
	return cmd
}
