package report

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/schemas"
)

// RunLine is one run of the log as t1 runs lists it: its status, where it
// branched from, how far it trained and when it last did something.
type RunLine struct {
	Run    string `json:"run"`
	Status string `json:"status"`
	Parent string `json:"parent,omitempty"`
	// Branch is where a branch left Parent.
	Branch *schemas.BranchPoint `json:"branch,omitempty"`
	// Iterations counts the run's policy updates of distinct iterations,
	// of Planned (what run.started froze; 0 without one).
	Iterations int `json:"iterations"`
	Planned    int `json:"iterations_planned"`
	// PolicyVersions are the versions the run made itself (fine-tuning,
	// updates), ascending.
	PolicyVersions []int64   `json:"policy_versions"`
	Events         uint64    `json:"events"`
	LastEvent      time.Time `json:"last_event"`
}

// Runs lists every run of the log, sorted by id: per run one replay of its
// run.started, sft.completed and policy.updated events and two lookups,
// whatever else it holds.
func Runs(ctx context.Context, log *engine.Log) ([]RunLine, error) {
	counts, err := log.EventCounts(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]RunLine, 0, len(ids))
	for _, id := range ids {
		c := counts[id]
		l := RunLine{Run: id, PolicyVersions: []int64{}}
		for _, n := range c {
			l.Events += n
		}
		iterations := map[int]bool{}
		started := false
		err := log.ReplayRun(ctx, id, []string{schemas.RunStarted, schemas.SFTCompleted, schemas.PolicyUpdated}, func(ev engine.Event) error {
			switch ev.Type {
			case schemas.RunStarted:
				var p schemas.RunStartedPayload
				if err := decode(ev, &p); err != nil {
					return err
				}
				started, l.Parent, l.Branch, l.Planned = true, p.Parent, p.Branch, p.Iterations
			case schemas.SFTCompleted:
				var p schemas.SFTCompletedPayload
				if err := decode(ev, &p); err != nil {
					return err
				}
				l.PolicyVersions = append(l.PolicyVersions, p.PolicyVersion)
			case schemas.PolicyUpdated:
				var p schemas.PolicyUpdatedPayload
				if err := decode(ev, &p); err != nil {
					return err
				}
				iterations[p.Iteration] = true
				l.PolicyVersions = append(l.PolicyVersions, p.PolicyVersion)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("runs: %s: %w", id, err)
		}
		l.Iterations = len(iterations)
		slices.Sort(l.PolicyVersions)
		l.PolicyVersions = slices.Compact(l.PolicyVersions)
		switch {
		case c[schemas.RunFailed] > 0:
			l.Status = StatusFailed
		case c[schemas.RunCompleted] > 0:
			l.Status = StatusCompleted
		default:
			l.Status = openStatus(started, l.Branch)
		}
		last, ok, err := log.LastEvent(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("runs: %w", err)
		}
		if ok {
			l.LastEvent = last.Time.UTC()
		}
		out = append(out, l)
	}
	return out, nil
}

// WriteRuns prints runs as `t1 runs` lists them: a row per run, a branch
// naming where it left its parent and what it changed.
func WriteRuns(w io.Writer, runs []RunLine) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no runs in the log")
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
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
}

// RunList is Runs' list, which prints as WriteRuns does.
type RunList []RunLine

// WriteText is WriteRuns of the list.
func (r RunList) WriteText(w io.Writer) error { return WriteRuns(w, r) }
