package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

func poolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "pool", Short: "The sealed training pool of a run"}
	var run string
	var version int
	show := &cobra.Command{
		Use:   "show --run R [--version N]",
		Short: "A sealed pool's tasks with category and difficulty histograms and the top-five category share",
		Long: `Reads the run's pool.sealed event (the latest version unless --version is given) and the
tasks-table rows it claims, and prints the pool's size, the accepted tasks sealing dropped as
near-duplicates of another, histograms by category and by difficulty, the share of the pool held by its five
largest categories (1.0 means at most five categories: a narrow pool), and every task.`,
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
			sealed, err := sealedPool(cmd.Context(), in.Log, run, version)
			if err != nil {
				return err
			}
			rows, err := poolRows(cmd.Context(), in.Store, sealed)
			if err != nil {
				return err
			}
			sum := summarisePool(run, sealed, rows)
			if g.json {
				return printJSON(cmd, sum)
			}
			printPool(cmd.OutOrStdout(), sum)
			return nil
		},
	}
	show.Flags().StringVar(&run, "run", "", "run id")
	show.Flags().IntVar(&version, "version", 0, "pool version (default: the latest sealed)")
	cmd.AddCommand(show)
	return cmd
}

// sealedPool returns the run's pool.sealed payload of the given version, or
// of the latest version when version is 0.
func sealedPool(ctx context.Context, l *engine.Log, run string, version int) (schemas.PoolSealedPayload, error) {
	var found []schemas.PoolSealedPayload
	err := l.Replay(ctx, []string{engine.Subject(run, schemas.PoolSealed)}, engine.ReplayFrom{}, func(ev engine.Event) error {
		var p schemas.PoolSealedPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return fmt.Errorf("event %s: %w", ev.ID, err)
		}
		found = append(found, p)
		return nil
	})
	if err != nil {
		return schemas.PoolSealedPayload{}, err
	}
	if len(found) == 0 {
		return schemas.PoolSealedPayload{}, fmt.Errorf("run %s has no sealed pool (t1 events list --run %s --type pool.sealed)", run, run)
	}
	slices.SortFunc(found, func(a, b schemas.PoolSealedPayload) int { return cmp.Compare(a.PoolVersion, b.PoolVersion) })
	if version == 0 {
		return found[len(found)-1], nil
	}
	for _, p := range found {
		if p.PoolVersion == version {
			return p, nil
		}
	}
	return schemas.PoolSealedPayload{}, fmt.Errorf("run %s has no pool version %d (latest %d)", run, version, found[len(found)-1].PoolVersion)
}

// poolRows reads the tasks rows the sealed pool claims, keeping only the
// pool's tasks: a claimed file may also hold tasks the pool left out.
func poolRows(ctx context.Context, st store.ObjectStore, p schemas.PoolSealedPayload) ([]schemas.TaskRow, error) {
	in := map[string]bool{}
	for _, id := range p.TaskIDs {
		in[id] = true
	}
	var out []schemas.TaskRow
	seen := map[string]bool{}
	for i := range p.Pool {
		ref := p.Pool[i]
		rows, err := schemas.ReadRows[schemas.TaskRow](ctx, st, ref.Key, &ref)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if in[r.TaskID] && !seen[r.TaskID] {
				seen[r.TaskID] = true
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// poolSummary is what `t1 pool show` prints.
type poolSummary struct {
	Run          string     `json:"run"`
	Version      int        `json:"pool_version"`
	Tasks        int        `json:"tasks"`
	Excluded     int        `json:"excluded"`
	Categories   []binCount `json:"categories"`
	Difficulties []binCount `json:"difficulties"`
	// TopFiveShare is the fraction of the pool in its five largest
	// categories.
	TopFiveShare float64    `json:"top_five_share"`
	Missing      []string   `json:"missing_rows,omitempty"` // pool task ids without a tasks row
	List         []poolTask `json:"task_list"`
}

type binCount struct {
	Name  string  `json:"name"`
	Count int     `json:"count"`
	Share float64 `json:"share"`
}

type poolTask struct {
	ID         string `json:"task_id"`
	Category   string `json:"category"`
	Difficulty string `json:"difficulty"`
	Round      int32  `json:"round"`
	Steps      int32  `json:"steps"`
	Source     string `json:"source"`
}

func summarisePool(run string, p schemas.PoolSealedPayload, rows []schemas.TaskRow) poolSummary {
	s := poolSummary{Run: run, Version: p.PoolVersion, Tasks: len(p.TaskIDs), Excluded: p.Excluded}
	cats, diffs := map[string]int{}, map[string]int{}
	have := map[string]bool{}
	for _, r := range rows {
		have[r.TaskID] = true
		cats[r.Category]++
		diffs[r.Difficulty]++
		s.List = append(s.List, poolTask{r.TaskID, r.Category, r.Difficulty, r.Round, r.Steps, r.Source})
	}
	for _, id := range p.TaskIDs {
		if !have[id] {
			s.Missing = append(s.Missing, id)
		}
	}
	slices.SortFunc(s.List, func(a, b poolTask) int {
		return cmp.Or(cmp.Compare(a.Category, b.Category), cmp.Compare(a.Round, b.Round), cmp.Compare(a.ID, b.ID))
	})
	s.Categories, s.Difficulties = bins(cats, len(rows)), bins(diffs, len(rows))
	top := 0
	for i, b := range s.Categories {
		if i < 5 {
			top += b.Count
		}
	}
	if len(rows) > 0 {
		s.TopFiveShare = float64(top) / float64(len(rows))
	}
	return s
}

// bins orders a histogram by count, largest first, then by name.
func bins(h map[string]int, total int) []binCount {
	out := []binCount{}
	for name, n := range h {
		out = append(out, binCount{Name: name, Count: n, Share: float64(n) / float64(max(total, 1))})
	}
	slices.SortFunc(out, func(a, b binCount) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Name, b.Name)) })
	return out
}

func printPool(w io.Writer, s poolSummary) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s\n", s.Run)
	fmt.Fprintf(tw, "pool version\t%d\n", s.Version)
	fmt.Fprintf(tw, "tasks\t%d (%d excluded as near-duplicates of a pool task)\n", s.Tasks, s.Excluded)
	fmt.Fprintf(tw, "top-five share\t%.2f\n", s.TopFiveShare)
	for _, b := range s.Categories {
		fmt.Fprintf(tw, "category %s\t%d\t%.2f\n", b.Name, b.Count, b.Share)
	}
	for _, b := range s.Difficulties {
		fmt.Fprintf(tw, "difficulty %s\t%d\t%.2f\n", b.Name, b.Count, b.Share)
	}
	if len(s.Missing) > 0 {
		fmt.Fprintf(tw, "missing rows\t%v\n", s.Missing)
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTASK\tCATEGORY\tDIFFICULTY\tROUND\tSTEPS\tSOURCE")
	for _, t := range s.List {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", t.ID, t.Category, t.Difficulty, t.Round, t.Steps, t.Source)
	}
	tw.Flush()
}
