package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/digest"
	"github.com/t1pipe/t1/local"
)

func digestCmd(g *globals) *cobra.Command {
	var run string
	cmd := &cobra.Command{
		Use:   "digest --run R",
		Short: "Fingerprint a run's artifacts: per-table row hashes, event ids and objects, without wall-clock columns",
		Long: `Reads every table object, checkpoint, bundle and snapshot that the run's events point to
(verifying each claim check), canonicalises them — rows sorted by content, wall-clock columns
(` + strings.Join(digest.WallClock(), ", ") + `) left out, snapshot entry times ignored — and prints per table
its row count and SHA-256, per event type the hash of its sorted event ids, per object kind
a hash, the count of attempts, rewards, policy versions and events stored more than once
(each must be 0), and one overall SHA-256. Two runs of one configuration and seed have
equal digests however they ran: in one process or as workers, uninterrupted or resumed.
Objects under runs/<run>/ that no event names are not part of the run and are ignored.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if run == "" {
				return fmt.Errorf("--run is required")
			}
			in, err := g.open(cmd.Context(), local.Options{})
			if err != nil {
				return err
			}
			defer in.Close()
			d, err := digest.Compute(cmd.Context(), in.Log, in.Store, run)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd, d)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "run\t%s\n", d.Run)
			for _, t := range d.Tables {
				fmt.Fprintf(tw, "table %s\t%d rows\t%d files\t%s\n", t.Name, t.Rows, t.Files, t.SHA256)
			}
			for _, e := range d.Events {
				fmt.Fprintf(tw, "events %s\t%d ids\t\t%s\n", e.Type, e.Count, e.SHA256)
			}
			for _, o := range d.Objects {
				fmt.Fprintf(tw, "objects %s\t%d\t\t%s\n", o.Kind, o.Count, o.SHA256)
			}
			du := d.Duplicates
			fmt.Fprintf(tw, "duplicates\ttrajectories %d, rewards %d, policy versions %d, events %d\n", du.Trajectories, du.Rewards, du.PolicyVersions, du.Events)
			fmt.Fprintf(tw, "digest\t%s\n", d.SHA256)
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "run id")
	return cmd
}
