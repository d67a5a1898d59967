package hostres

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Resource is a recorded resource as it stands now.
type Resource struct {
	Entry
	Exists bool  `json:"exists"`
	Bytes  int64 `json:"bytes"` // Mount: bytes the file system holds; Cgroup: memory charged to it; -1 unknown
	Tasks  int   `json:"tasks"` // Cgroup: its processes
}

// Held is an owner and what it records.
type Held struct {
	Owner     Owner      `json:"owner"`
	Alive     bool       `json:"alive"`
	Resources []Resource `json:"resources"`
}

// Listing is what List found.
type Listing struct {
	Owners []Held `json:"owners"`
	// Unrecorded are sandbox mounts and cgroups (named t1-sandbox-*) that
	// no record names: left by a t1 that did not record, or by another
	// user's. They are shown, never reaped: nothing says whose they are.
	Unrecorded []Resource `json:"unrecorded"`
}

// List reads the registry of the caller's uid and measures what it
// records.
func (r *Registry) List() (Listing, error) {
	var l Listing
	names, err := os.ReadDir(r.dir)
	if err != nil && !os.IsNotExist(err) {
		return l, err
	}
	recorded := map[string]bool{}
	for _, n := range names {
		d := filepath.Join(r.dir, n.Name())
		o, err := readOwner(d)
		if err != nil {
			continue
		}
		es, _ := readEntries(d)
		h := Held{Owner: o, Alive: o.Alive()}
		for _, e := range es {
			recorded[e.Path] = true
			h.Resources = append(h.Resources, measure(e))
		}
		l.Owners = append(l.Owners, h)
	}
	ms, _ := mounts()
	for _, m := range ms {
		if strings.HasPrefix(m.source, "t1-sandbox-") && !recorded[m.dir] {
			l.Unrecorded = append(l.Unrecorded, measure(Entry{Kind: Mount, Path: m.dir, FS: m.fs, Source: m.source}))
		}
	}
	for _, m := range ms {
		if m.fs != "cgroup" && m.fs != "cgroup2" {
			continue
		}
		for _, p := range findCgroups(m.dir, 4) {
			if !recorded[p] {
				l.Unrecorded = append(l.Unrecorded, measure(Entry{Kind: Cgroup, Path: p}))
			}
		}
	}
	return l, nil
}

// List is Default().List.
func List() (Listing, error) { return Default().List() }

// findCgroups lists directories named t1-sandbox-* at most depth levels
// below root.
func findCgroups(root string, depth int) []string {
	if depth == 0 {
		return nil
	}
	es, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(root, e.Name())
		if strings.HasPrefix(e.Name(), "t1-sandbox-") {
			out = append(out, p)
			continue
		}
		out = append(out, findCgroups(p, depth-1)...)
	}
	return out
}

func measure(e Entry) Resource {
	r := Resource{Entry: e, Bytes: -1}
	var st unix.Stat_t
	r.Exists = unix.Lstat(e.Path, &st) == nil
	if !r.Exists {
		return r
	}
	switch e.Kind {
	case Mount:
		ms, _ := mounts()
		if !slices.ContainsFunc(ms, func(m mountPoint) bool { return m.dir == e.Path && (e.FS == "" || m.fs == e.FS) }) {
			r.Exists = false
			return r
		}
		var fs unix.Statfs_t
		if unix.Statfs(e.Path, &fs) == nil {
			r.Bytes = int64(fs.Blocks-fs.Bfree) * fs.Bsize
		}
	case Cgroup:
		for _, f := range []string{"memory.current", "memory.usage_in_bytes"} {
			if b, err := os.ReadFile(filepath.Join(e.Path, f)); err == nil {
				r.Bytes, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				break
			}
		}
		if b, err := os.ReadFile(filepath.Join(e.Path, "cgroup.procs")); err == nil {
			r.Tasks = len(strings.Fields(string(b)))
		}
	}
	return r
}

// WriteText prints one line per owner and one per resource: what it is,
// its age, what it holds, and whether its owner is alive.
func (l Listing) WriteText(w io.Writer) {
	now := time.Now()
	if len(l.Owners) == 0 && len(l.Unrecorded) == 0 {
		fmt.Fprintln(w, "no t1 sandbox resources on this host")
		return
	}
	for _, h := range l.Owners {
		state := "alive"
		if !h.Alive {
			state = "dead: t1 sandbox reap (or the next t1 that makes sandboxes) removes its resources"
		}
		fmt.Fprintf(w, "pid %d (uid %d, up %s, %s): %s\n", h.Owner.PID, h.Owner.UID, age(now, h.Owner.Created), state, strings.Join(h.Owner.Args, " "))
		for _, r := range h.Resources {
			writeResource(w, now, r)
		}
	}
	if len(l.Unrecorded) > 0 {
		fmt.Fprintf(w, "unrecorded (no owner known; left by a t1 that did not record, or another user's; not reaped):\n")
		for _, r := range l.Unrecorded {
			writeResource(w, now, r)
		}
	}
}

func writeResource(w io.Writer, now time.Time, r Resource) {
	var what []string
	if !r.Created.IsZero() {
		what = append(what, "age "+age(now, r.Created))
	}
	if r.Bytes >= 0 {
		what = append(what, fmt.Sprintf("%.1f MiB", float64(r.Bytes)/(1<<20)))
	}
	if r.Kind == Cgroup && r.Exists {
		what = append(what, fmt.Sprintf("%d tasks", r.Tasks))
	}
	if !r.Exists {
		what = append(what, "gone")
	}
	kind := string(r.Kind)
	if r.FS != "" {
		kind += " " + r.FS
	}
	fmt.Fprintf(w, "  %-13s %s  %s  %s\n", kind, r.Path, strings.Join(what, ", "), r.Note)
}

func age(now, t time.Time) string { return now.Sub(t).Round(time.Second).String() }

// WriteText says what Reap removed and what it could not.
func (r Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "reaped %d resources of %d dead t1 processes\n", r.Removed, r.Owners)
	for _, f := range r.Failed {
		fmt.Fprintf(w, "  left: %s\n", f)
	}
}
