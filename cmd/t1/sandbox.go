package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/infra/sandbox"
)

// sandboxExit ends the process with a sandboxed command's exit code; tests
// replace it.
var sandboxExit = os.Exit

type sandboxFlags struct {
	task    string
	backend string
	timeout time.Duration
}

func sandboxCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "sandbox",
		Short: "Run commands in a fresh task sandbox (bubblewrap, or the plain process backend)",
		Long: "Each invocation builds a fresh sandbox from a Harbor task directory (environment/Dockerfile\n" +
			"subset or environment/setup.sh), runs in it, and removes it with every process it started.\n" +
			"The backend and limits come from the configuration's sandbox section; --backend overrides.",
	}
	c.AddCommand(sandboxRunCmd(g), sandboxShellCmd(g))
	return c
}

func (f *sandboxFlags) register(c *cobra.Command, timeoutDefault time.Duration) {
	c.Flags().StringVar(&f.task, "task", "", "Harbor task directory (default: an empty sandbox)")
	c.Flags().StringVar(&f.backend, "backend", "", "auto, bwrap or process (default: the config's sandbox.backend)")
	c.Flags().DurationVar(&f.timeout, "timeout", timeoutDefault, "bound on the command (default: the config's sandbox.limits.wall_clock)")
}

// start builds the sandbox the flags and configuration describe.
func (f *sandboxFlags) start(cmd *cobra.Command, g *globals) (sandbox.Sandbox, time.Duration, error) {
	cfg, err := g.load()
	if err != nil {
		return nil, 0, err
	}
	return startSandbox(cmd, cfg, f)
}

func startSandbox(cmd *cobra.Command, cfg config.Config, f *sandboxFlags) (sandbox.Sandbox, time.Duration, error) {
	name := cfg.Sandbox.Backend
	if f.backend != "" {
		name = f.backend
	}
	be, err := cfg.Sandbox.NewBackend(name)
	if err != nil {
		return nil, 0, err
	}
	limits := cfg.Sandbox.SandboxLimits()
	timeout := limits.WallClock
	if f.timeout > 0 {
		timeout = f.timeout
		limits.WallClock = f.timeout
	}
	sb, err := be.Start(cmd.Context(), sandbox.Spec{TaskDir: f.task, Limits: limits})
	if err != nil {
		return nil, 0, err
	}
	return sb, timeout, nil
}

func sandboxRunCmd(g *globals) *cobra.Command {
	f := &sandboxFlags{}
	c := &cobra.Command{
		Use:   "run [--task DIR] [--backend auto|bwrap|process] [--timeout D] -- CMD [ARG…]",
		Short: "Run one command in a fresh sandbox, print its output and exit with its code",
		Long: "Runs CMD in a fresh sandbox, streaming its output, and exits with its exit code (124 when it\n" +
			"timed out, 125 when the sandbox could not run it). With --json, prints the result instead.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, timeout, err := f.start(cmd, g)
			if err != nil {
				return err
			}
			c := sandbox.Cmd{Args: args, Timeout: timeout, Stdin: cmd.InOrStdin()}
			if !g.json {
				c.StreamStdout, c.StreamStderr = cmd.OutOrStdout(), cmd.ErrOrStderr()
				c.MaxOutput = 1024
			}
			res, err := sb.Exec(cmd.Context(), c)
			info := sb.Info()
			sb.Close()
			if err != nil {
				return err
			}
			code := res.ExitCode
			if res.TimedOut {
				code = 124
			} else if code < 0 || code > 255 {
				code = 125
			}
			if g.json {
				if err := printJSON(cmd, struct {
					Backend  string `json:"backend"`
					Isolated bool   `json:"isolated"`
					sandbox.Result
				}{info.Backend, info.Isolated, res}); err != nil {
					return err
				}
			} else {
				if res.TimedOut {
					fmt.Fprintf(cmd.ErrOrStderr(), "t1 sandbox: timed out after %s\n", timeout)
				}
				if res.DiskExceeded {
					fmt.Fprintf(cmd.ErrOrStderr(), "t1 sandbox: disk limit exceeded (%s)\n", sandbox.FormatSize(info.Limits.Disk))
				}
			}
			if code != 0 {
				sandboxExit(code)
			}
			return nil
		},
	}
	f.register(c, 0)
	return c
}

func sandboxShellCmd(g *globals) *cobra.Command {
	f := &sandboxFlags{}
	c := &cobra.Command{
		Use:   "shell [--task DIR] [--backend auto|bwrap|process] [--timeout D]",
		Short: "An interactive bash in a fresh sandbox, removed on exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sb, timeout, err := f.start(cmd, g)
			if err != nil {
				return err
			}
			defer sb.Close()
			info := sb.Info()
			fmt.Fprintf(cmd.ErrOrStderr(), "t1 sandbox: %s backend (isolated: %v), %s; exit or Ctrl-D to leave\n", info.Backend, info.Isolated, info.Root)
			res, err := sb.Exec(cmd.Context(), sandbox.Cmd{
				Args:         []string{"bash", "--norc", "--noprofile", "-i"},
				Timeout:      timeout,
				Stdin:        cmd.InOrStdin(),
				StreamStdout: cmd.OutOrStdout(),
				StreamStderr: cmd.ErrOrStderr(),
				MaxOutput:    1024,
			})
			if err != nil {
				return err
			}
			if res.TimedOut {
				fmt.Fprintf(cmd.ErrOrStderr(), "t1 sandbox: session ended after %s (--timeout)\n", timeout)
			}
			return nil
		},
	}
	f.register(c, time.Hour)
	return c
}
