package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

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
		Long:  sandbox.Help,
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
	return cfg.Sandbox.Start(cmd.Context(), f.backend, f.task, f.timeout)
}

func sandboxRunCmd(g *globals) *cobra.Command {
	f := &sandboxFlags{}
	c := &cobra.Command{
		Use:   "run [--task DIR] [--backend auto|bwrap|process] [--timeout D] -- CMD [ARG…]",
		Short: "Run one command in a fresh sandbox, print its output and exit with its code",
		Long:  sandbox.RunHelp,
		Args:  cobra.MinimumNArgs(1),
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
			out, err := sandbox.RunOnce(cmd.Context(), sb, c)
			if err != nil {
				return err
			}
			if g.json {
				if err := printJSON(cmd, out); err != nil {
					return err
				}
			} else {
				out.WriteNotes(cmd.ErrOrStderr())
			}
			if code := out.Code(); code != 0 {
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
			return sandbox.Interactive(cmd.Context(), sb, timeout, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(c, time.Hour)
	return c
}
