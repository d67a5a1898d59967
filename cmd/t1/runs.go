package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/report"
)

func runsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "runs",
		Short: "List every run of the log: status, parent and branch point, iterations, policy versions, last event",
		Long: `Lists the runs the event log holds, sorted by id. A branch (t1 replay) names its parent and
where it left it: the stage it re-ran, and for a continued branch the iteration it went on from.
Status is completed, failed, running, replayed (a branch that re-ran one stage and nothing
after it) or unstarted (events without run.started). Iterations counts the policy updates of the
run's own, of those its run.started planned; policy versions are those the run made itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := g.open(cmd.Context(), local.Options{NoStore: true})
			if err != nil {
				return err
			}
			defer in.Close()
			runs, err := report.Runs(cmd.Context(), in.Log)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd, runs)
			}
			if len(runs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no runs in the log")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tSTATUS\tPARENT\tBRANCH POINT\tITERATIONS\tPOLICY VERSIONS\tEVENTS\tLAST EVENT")
			for _, r := range runs {
				parent, point := "–", "–"
				if r.Parent != "" {
					parent = r.Parent
				}
				if b := r.Branch; b != nil {
					point = b.Stage
					if b.Continue && b.Stage != "sft" {
						point += fmt.Sprintf(" @ iteration %d, continued", b.Iteration)
					} else if b.Continue {
						point += ", continued"
					}
					for _, o := range b.Overrides {
						point += fmt.Sprintf("; %s %s (was %s)", o.Key, o.Value, o.Parent)
					}
				}
				versions := make([]string, len(r.PolicyVersions))
				for i, v := range r.PolicyVersions {
					versions[i] = fmt.Sprintf("v%d", v)
				}
				last := "–"
				if !r.LastEvent.IsZero() {
					last = r.LastEvent.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%d\t%s\n", r.Run, r.Status, parent, point, r.Iterations, r.Planned,
					strings.Join(versions, " "), r.Events, last)
			}
			return tw.Flush()
		},
	}
}
