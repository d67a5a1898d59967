package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/store"
)

type ablationSummary struct {
	Base     string             `json:"base"`
	Runs     []*pipelineSummary `json:"runs"`
	Report   string             `json:"report"`
	HTML     string             `json:"report_html"`
	Stopped  bool               `json:"stopped,omitempty"`
	Variants []string           `json:"variants"`
}

func ablateCmd(g *globals) *cobra.Command {
	var only []string
	cmd := &cobra.Command{
		Use:   "ablate [--variants a,b]",
		Short: "Run the base run and its ablation variants on one seed and compare them in one report",
		Long: `Runs the configured run and then each variant of the configuration's variants list (by
default replay-off, critic-cold, reward-fraction and reward-binary) as run <run.id>-<name>, one
after the other in this process on the same infrastructure and seed, and writes a report that
shows them side by side: runs/<run.id>/ablation.md and ablation.html, in the store and under
the data directory. Runs that already completed are not run again, so an interrupted ablation
resumes where it stopped.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			names := only
			if len(names) == 0 {
				names = cfg.VariantNames()
			}
			if len(names) == 0 {
				return fmt.Errorf("no variants configured (variants: in %s) and none named with --variants", configName(g))
			}
			cfgs := []config.Config{cfg}
			for _, n := range names {
				v, err := cfg.Variant(n)
				if err != nil {
					return err
				}
				cfgs = append(cfgs, v)
			}
			ctx := cmd.Context()
			in, err := local.Open(ctx, cfg, local.Options{Serve: true})
			if err != nil {
				return err
			}
			defer in.Close()
			sum, err := ablate(ctx, cmd.ErrOrStderr(), in, cfgs)
			if err != nil {
				return err
			}
			sum.Variants = names
			if sum.Stopped {
				return nil
			}
			if g.json {
				return printJSON(cmd, sum)
			}
			printAblation(cmd.OutOrStdout(), sum)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&only, "variants", nil, "variants to run, by name (default: every configured variant)")
	return cmd
}

// ablate runs each configuration's run to its end, in order, and writes
// the comparison report of all of them under the first one's run.
func ablate(ctx context.Context, w io.Writer, in *local.Infra, cfgs []config.Config) (*ablationSummary, error) {
	sum := &ablationSummary{Base: cfgs[0].Run.ID}
	for _, c := range cfgs {
		fmt.Fprintf(w, "== run %s\n", c.Run.ID)
		// The servers, store and log are shared; only what the stages
		// are built from changes between variants.
		vin := *in
		vin.Config = c
		s, err := executePipeline(ctx, w, &vin, true)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", c.Run.ID, err)
		}
		if s == nil {
			fmt.Fprintf(w, "stopped; run `t1 ablate` again to resume\n")
			sum.Stopped = true
			return sum, nil
		}
		sum.Runs = append(sum.Runs, s)
	}
	runs := make([]*report.Run, len(cfgs))
	for i, c := range cfgs {
		r, err := report.Load(ctx, in.Log, in.Store, c.Run.ID)
		if err != nil {
			return nil, err
		}
		runs[i] = r
	}
	md, html, err := report.Render(runs)
	if err != nil {
		return nil, err
	}
	if sum.Report, err = writeRunFile(ctx, in, sum.Base, "", keys.Ablation(sum.Base), "text/markdown", md); err != nil {
		return nil, err
	}
	if sum.HTML, err = writeRunFile(ctx, in, sum.Base, "", keys.AblationHTML(sum.Base), "text/html; charset=utf-8", html); err != nil {
		return nil, err
	}
	return sum, nil
}

// writeRunFile stores data at key, an object of run directly under
// runs/<run>/, and writes the same file as <dir>/<base of key>, dir
// defaulting to <data>/runs/<run>; it returns the file's path.
func writeRunFile(ctx context.Context, in *local.Infra, run, dir, key, contentType string, data []byte) (string, error) {
	if _, err := in.Store.Put(ctx, key, bytes.NewReader(data), int64(len(data)), store.PutOptions{ContentType: contentType}); err != nil {
		return "", fmt.Errorf("store %s: %w", key, err)
	}
	if dir == "" {
		dir = filepath.Join(in.DataDir, "runs", run)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	file := filepath.Join(dir, path.Base(key))
	return file, os.WriteFile(file, data, 0o644)
}

func printAblation(w io.Writer, s *ablationSummary) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tstatus\tpolicy\tevals (resolve / partial credit)\telapsed")
	for _, r := range s.Runs {
		var evals []string
		for _, e := range r.Evals {
			evals = append(evals, fmt.Sprintf("v%d %.2f/%.2f", e.PolicyVersion, e.ResolveRate, e.MeanReward))
		}
		fmt.Fprintf(tw, "%s\t%s\tv%d\t%s\t%s\n", r.Run, r.Status, r.PolicyLast, strings.Join(evals, "  "), r.Elapsed.Round(1e9))
	}
	tw.Flush()
	fmt.Fprintf(w, "report %s\nhtml   %s\n", s.Report, s.HTML)
}

func configName(g *globals) string {
	if g.configPath != "" {
		return g.configPath
	}
	return "the configuration"
}
