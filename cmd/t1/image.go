package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/image"
	"github.com/t1pipe/t1/local"
)

func imageCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "image",
		Short: "Environment images built from task Dockerfiles (sandbox.image: dockerfile)",
	}
	c.AddCommand(imageBuildCmd(g))
	return c
}

func imageBuildCmd(g *globals) *cobra.Command {
	var cacheDir string
	var verbose, push bool
	c := &cobra.Command{
		Use:   "build TASKDIR",
		Short: "Build a task's environment/Dockerfile into an image; print its layers, cache hits and size",
		Long: "Maps FROM ubuntu|debian|python onto a Debian base made with debootstrap from the host's apt\n" +
			"mirror, runs RUN steps with the network as docker build does, and keeps one content-addressed\n" +
			"layer per step under the cache (sandbox.image_cache, else ~/.cache/t1/images): a second build,\n" +
			"or a task sharing the Dockerfile's prefix, reuses them. Needs root, bubblewrap and debootstrap.\n" +
			"--push stores the layers in the object store (images/layers/<key>.tar).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			opt := image.Options{CacheDir: cfg.Sandbox.ImageCache}
			if cacheDir != "" {
				opt.CacheDir = cacheDir
			}
			if verbose {
				opt.Log = cmd.ErrOrStderr()
			}
			res, err := image.Build(cmd.Context(), args[0], opt)
			if err != nil {
				return err
			}
			pushed := 0
			if push {
				in, err := g.open(cmd.Context(), local.Options{})
				if err != nil {
					return err
				}
				defer in.Close()
				if pushed, err = image.Push(cmd.Context(), in.Store, res); err != nil {
					return err
				}
			}
			if g.json {
				return printJSON(cmd, res)
			}
			return printImage(cmd.OutOrStdout(), res, push, pushed)
		},
	}
	c.Flags().StringVar(&cacheDir, "cache", "", "layer cache directory (default: the config's sandbox.image_cache, else ~/.cache/t1/images)")
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "stream debootstrap's and each RUN's output to stderr")
	c.Flags().BoolVar(&push, "push", false, "store the layers in the object store")
	return c
}

func printImage(w io.Writer, res *image.Result, push bool, pushed int) error {
	fmt.Fprintln(w, res.Mapping)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	hits, layers := 0, res.Layers()
	for _, s := range layers {
		state := "built"
		if s.Cached {
			state, hits = "cached", hits+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs\t%s\n", s.Key[:12], state, mib(s.Size), s.Duration.Seconds(), s.Instruction)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d layers, %d cache hits, %s\n", len(layers), hits, mib(res.Size))
	if push {
		fmt.Fprintf(w, "pushed %d layers (%d already stored)\n", pushed, len(layers)-pushed)
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
