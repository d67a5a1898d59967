package main

import (
	"cmp"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/image"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/local"
)

// sandboxExit ends the process with a sandboxed command's exit code; tests
// replace it.
var sandboxExit = os.Exit

// sandboxFlags are the flags of a command that builds a fresh sandbox.
type sandboxFlags struct {
	task, backend string
	timeout       time.Duration
}

func (f *sandboxFlags) bind(c *cobra.Command, timeoutDefault time.Duration) *cobra.Command {
	c.Flags().StringVar(&f.task, "task", "", "Harbor task directory (default: an empty sandbox)")
	c.Flags().StringVar(&f.backend, "backend", "", "auto, bwrap or process (default: the config's sandbox.backend)")
	c.Flags().DurationVar(&f.timeout, "timeout", timeoutDefault, "bound on the command (default: the config's sandbox.limits.wall_clock)")
	return c
}

func sandboxCmd(g *globals) *cobra.Command {
	var rf, sf sandboxFlags
	run := leaf("run [--task DIR] [--backend auto|bwrap|process] [--timeout D] -- CMD [ARG…]", "Run one command in a fresh sandbox, print its output and exit with its code", sandbox.RunHelp, cobra.MinimumNArgs(1),
		g.configured(nil, func(cmd *cobra.Command, args []string, cfg config.Config) error {
			sb, timeout, err := cfg.Sandbox.Start(cmd.Context(), rf.backend, rf.task, rf.timeout)
			if err != nil {
				return err
			}
			c := sandbox.Cmd{Args: args, Timeout: timeout, Stdin: cmd.InOrStdin()}
			if !g.json {
				c.StreamStdout, c.StreamStderr, c.MaxOutput = cmd.OutOrStdout(), cmd.ErrOrStderr(), 1024
			}
			out, err := sandbox.RunOnce(cmd.Context(), sb, c)
			if err != nil {
				return err
			}
			if err := g.emit(cmd, out, plain(func(io.Writer) { out.WriteNotes(cmd.ErrOrStderr()) })); err != nil {
				return err
			}
			if code := out.Code(); code != 0 {
				sandboxExit(code)
			}
			return nil
		}))
	shell := leaf("shell [--task DIR] [--backend auto|bwrap|process] [--timeout D]", "An interactive bash in a fresh sandbox, removed on exit", "", cobra.NoArgs,
		g.configured(nil, func(cmd *cobra.Command, _ []string, cfg config.Config) error {
			sb, timeout, err := cfg.Sandbox.Start(cmd.Context(), sf.backend, sf.task, sf.timeout)
			if err != nil {
				return err
			}
			defer sb.Close()
			return sandbox.Interactive(cmd.Context(), sb, timeout, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		}))
	ls := leaf("ls", "The sandboxes' mounts, cgroups and directories on this host: owner, age, usage", hostres.LsHelp, cobra.NoArgs, func(cmd *cobra.Command, _ []string) error {
		l, err := hostres.List()
		return cmp.Or(err, g.emit(cmd, l, plain(l.WriteText)))
	})
	reap := leaf("reap", "Remove what dead t1 processes left on this host (live ones keep theirs)", hostres.ReapHelp, cobra.NoArgs, func(cmd *cobra.Command, _ []string) error {
		rep, err := hostres.Reap()
		return cmp.Or(g.emit(cmd, rep, plain(rep.WriteText)), err)
	})
	return group("sandbox", "Run commands in a fresh task sandbox (bubblewrap, or the plain process backend)", sandbox.Help,
		rf.bind(run, 0), sf.bind(shell, time.Hour), ls, reap)
}

func imageCmd(g *globals) *cobra.Command {
	var cacheDir string
	var verbose, push bool
	build := leaf("build TASKDIR", "Build a task's environment/Dockerfile into an image; print its layers, cache hits and size", image.BuildHelp, cobra.ExactArgs(1),
		g.configured(nil, func(cmd *cobra.Command, args []string, cfg config.Config) error {
			opt := image.Options{CacheDir: cmp.Or(cacheDir, cfg.Sandbox.ImageCache)}
			if verbose {
				opt.Log = cmd.ErrOrStderr()
			}
			res, err := image.Build(cmd.Context(), args[0], opt)
			if err != nil {
				return err
			}
			pushed := 0
			if push {
				err := g.infra(cmd, local.Options{}, true, func(in *local.Infra) (err error) {
					pushed, err = image.Push(cmd.Context(), in.Store, res)
					return err
				})
				if err != nil {
					return err
				}
			}
			return g.emit(cmd, res, func(w io.Writer) error { return res.WriteText(w, push, pushed) })
		}))
	build.Flags().StringVar(&cacheDir, "cache", "", "layer cache directory (default: the config's sandbox.image_cache, else ~/.cache/t1/images)")
	build.Flags().BoolVarP(&verbose, "verbose", "v", false, "stream debootstrap's and each RUN's output to stderr")
	build.Flags().BoolVar(&push, "push", false, "store the layers in the object store")
	return group("image", "Environment images built from task Dockerfiles (sandbox.image: dockerfile)", "", build)
}
