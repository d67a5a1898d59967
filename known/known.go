package known

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// listed bounds the names an error lists, so a log of many runs still
// gives one readable line; the closest come first, so the cut ones are
// the least likely to be meant.
const listed = 12

// Closest orders have by edit distance from name, ignoring case, then by
// name.
func Closest(name string, have []string) []string {
	out := slices.Clone(have)
	slices.Sort(out)
	out = slices.Compact(out)
	low := strings.ToLower(name)
	dist := make(map[string]int, len(out))
	for _, h := range out {
		dist[h] = Distance(low, strings.ToLower(h))
	}
	slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(dist[a], dist[b]) })
	return out
}

// Distance is the Levenshtein distance between a and b, in runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			sub := prev[j-1]
			if ra[i-1] != rb[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Unknown is the usage error (exit 2) for a name of kind what (run,
// table, …) that is not among have: one line, have listed closest first.
// plural names several of what.
func Unknown(what, plural, name string, have []string) error {
	if len(have) == 0 {
		return exit.Configf("unknown %s %q: there are no %s", what, name, plural)
	}
	names := Closest(name, have)
	more := ""
	if len(names) > listed {
		more = fmt.Sprintf(" and %d more", len(names)-listed)
		names = names[:listed]
	}
	return exit.Configf("unknown %s %q (%s: %s%s)", what, name, plural, strings.Join(names, ", "), more)
}

// Run checks that each of runs exists: it has events in the log, or
// objects in the store when st is not nil (t1 tasks import fills a run's
// tables before any event). The error lists the runs of the log.
func Run(ctx context.Context, log *engine.Log, st store.ObjectStore, runs ...string) error {
	have, err := log.Runs(ctx)
	if err != nil {
		return exit.InfraError(err)
	}
	for _, run := range runs {
		if err := runIn(ctx, have, st, run); err != nil {
			return err
		}
	}
	return nil
}

func runIn(ctx context.Context, have []string, st store.ObjectStore, run string) error {
	switch {
	case run == "":
		return exit.Configf("--run is required")
	case slices.Contains(have, run):
		return nil
	case st != nil && keys.ValidRun(run) == nil:
		for _, err := range st.List(ctx, keys.Run(run)) {
			if err != nil {
				return exit.InfraError(err)
			}
			return nil
		}
	}
	return Unknown("run", "runs", run, have)
}

// EventType checks that typ is an event type: one of the pipeline's
// (schemas.EventTypes), one's failure (<type>.failed) or one the log
// holds, of run when run is not "", so that a stage's own types (the
// demo's) pass too. A type no event has yet is known: a tail waits for
// it.
func EventType(ctx context.Context, log *engine.Log, run, typ string) error {
	counts, err := log.EventCounts(ctx, run)
	if err != nil {
		return exit.InfraError(err)
	}
	types := schemas.EventTypes()
	for _, t := range schemas.EventTypes() {
		types = append(types, t+".failed")
	}
	for _, byType := range counts {
		for t := range byType {
			types = append(types, t)
		}
	}
	return Name("event type", "event types", typ, types)
}

// Events checks the run and event type an events command filters on,
// either of which may be "" (every run, every type).
func Events(ctx context.Context, log *engine.Log, run, typ string) error {
	if run != "" {
		if err := Run(ctx, log, nil, run); err != nil {
			return err
		}
	}
	if typ == "" {
		return nil
	}
	return EventType(ctx, log, run, typ)
}

// Name checks that name is one of have, for names a command knows
// without asking the log: tables, columns, stages, formats.
func Name(what, plural, name string, have []string) error {
	if slices.Contains(have, name) {
		return nil
	}
	return Unknown(what, plural, name, have)
}
