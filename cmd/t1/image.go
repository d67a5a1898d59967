package main

import (
	"cmp"
	"io"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/image"
	"github.com/t1pipe/t1/local"
)

func imageCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "image", Short: "Environment images built from task Dockerfiles (sandbox.image: dockerfile)"}
	var cacheDir string
	var verbose, push bool
	build := &cobra.Command{
		Use:   "build TASKDIR",
		Short: "Build a task's environment/Dockerfile into an image; print its layers, cache hits and size",
		Long:  image.BuildHelp,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
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
			return g.emitErr(cmd, res, func(w io.Writer) error { return res.WriteText(w, push, pushed) })
		},
	}
	build.Flags().StringVar(&cacheDir, "cache", "", "layer cache directory (default: the config's sandbox.image_cache, else ~/.cache/t1/images)")
	build.Flags().BoolVarP(&verbose, "verbose", "v", false, "stream debootstrap's and each RUN's output to stderr")
	build.Flags().BoolVar(&push, "push", false, "store the layers in the object store")
	c.AddCommand(build)
	return c
}
