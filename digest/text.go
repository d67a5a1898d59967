package digest

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Help is what `t1 digest` says of itself.
func Help() string {
	return `Reads every table object, checkpoint, bundle and snapshot that the run's events point to
(verifying each claim check), canonicalises them — rows sorted by content, wall-clock columns
(` + strings.Join(WallClock(), ", ") + `) left out, snapshot entry times ignored — and prints per table
its row count and SHA-256, per event type the hash of its sorted event ids, per object kind
a hash, the count of attempts, rewards, policy versions and events stored more than once
(each must be 0), and one overall SHA-256. Two runs of one configuration and seed have
equal digests however they ran: in one process or as workers, uninterrupted or resumed.
Objects under runs/<run>/ that no event names are not part of the run and are ignored.`
}

// WriteText prints the digest one line per table, event type and object
// kind, then its duplicates and the overall hash.
func (d *Digest) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
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
}
