package report

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// ReadPool reads the run's sealed pool of the given version (the latest when
// version is 0) and the tasks rows it claims, as `t1 pool show` prints it.
func ReadPool(ctx context.Context, l *engine.Log, st store.ObjectStore, run string, version int) (PoolSummary, error) {
	sealed, err := sealedPool(ctx, l, run, version)
	if err != nil {
		return PoolSummary{}, err
	}
	rows, err := poolRows(ctx, st, sealed)
	if err != nil {
		return PoolSummary{}, err
	}
	return summarisePool(run, sealed, rows), nil
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
	have := make([]string, len(found))
	for i, p := range found {
		have[i] = strconv.Itoa(p.PoolVersion)
	}
	return schemas.PoolSealedPayload{}, known.Unknown("pool version", "pool versions of run "+run, strconv.Itoa(version), have)
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

// PoolSummary is a sealed pool: its size, its histograms by category
// and difficulty, and every task.
type PoolSummary struct {
	Run          string `json:"run"`
	Version      int    `json:"pool_version"`
	Tasks        int    `json:"tasks"`
	Excluded     int    `json:"excluded"`
	Categories   []Bin  `json:"categories"`
	Difficulties []Bin  `json:"difficulties"`
	// TopFiveShare is the fraction of the pool in its five largest
	// categories.
	TopFiveShare float64    `json:"top_five_share"`
	Missing      []string   `json:"missing_rows,omitempty"` // pool task ids without a tasks row
	List         []PoolTask `json:"task_list"`
}

// Bin is one bar of a histogram.
type Bin struct {
	Name  string  `json:"name"`
	Count int     `json:"count"`
	Share float64 `json:"share"`
}

// PoolTask is one task of a pool.
type PoolTask struct {
	ID         string `json:"task_id"`
	Category   string `json:"category"`
	Difficulty string `json:"difficulty"`
	Round      int32  `json:"round"`
	Steps      int32  `json:"steps"`
	Source     string `json:"source"`
}

func summarisePool(run string, p schemas.PoolSealedPayload, rows []schemas.TaskRow) PoolSummary {
	s := PoolSummary{Run: run, Version: p.PoolVersion, Tasks: len(p.TaskIDs), Excluded: p.Excluded}
	cats, diffs := map[string]int{}, map[string]int{}
	have := map[string]bool{}
	for _, r := range rows {
		have[r.TaskID] = true
		cats[r.Category]++
		diffs[r.Difficulty]++
		s.List = append(s.List, PoolTask{r.TaskID, r.Category, r.Difficulty, r.Round, r.Steps, r.Source})
	}
	for _, id := range p.TaskIDs {
		if !have[id] {
			s.Missing = append(s.Missing, id)
		}
	}
	slices.SortFunc(s.List, func(a, b PoolTask) int {
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
func bins(h map[string]int, total int) []Bin {
	out := []Bin{}
	for name, n := range h {
		out = append(out, Bin{Name: name, Count: n, Share: float64(n) / float64(max(total, 1))})
	}
	slices.SortFunc(out, func(a, b Bin) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Name, b.Name)) })
	return out
}

// WriteText prints s as `t1 pool show` does.
func (s PoolSummary) WriteText(w io.Writer) {
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
