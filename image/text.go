package image

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// BuildHelp is what `t1 image build` says of itself.
const BuildHelp = "Maps FROM ubuntu|debian|python onto a Debian base made with debootstrap from the host's apt\n" +
	"mirror, runs RUN steps as docker build does, their network t1's proxy to the package registries\n" +
	"alone (sandbox.registries: the host's apt mirror, PyPI, npm), builds every stage of a multi-stage\n" +
	"Dockerfile (the last is the image), and keeps one content-addressed\n" +
	"layer per step under the cache (sandbox.image_cache, else ~/.cache/t1/images): a second build,\n" +
	"or a task sharing the Dockerfile's prefix, reuses them. Needs root, bubblewrap and debootstrap.\n" +
	"--push stores the layers in the object store (images/layers/<key>.tar)."

// WriteText prints the base mapping, one line per layer and the totals;
// with push, how many layers the push stored.
func (r *Result) WriteText(w io.Writer, push bool, pushed int) error {
	fmt.Fprintln(w, r.Mapping)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	hits, layers := 0, r.Layers()
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
	fmt.Fprintf(w, "%d layers, %d cache hits, %s\n", len(layers), hits, mib(r.Size))
	if push {
		fmt.Fprintf(w, "pushed %d layers (%d already stored)\n", pushed, len(r.Keys)-pushed)
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
