package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/t1pipe/t1/infra/hostres"
)

// rlimits bound each process; a cgroup bounds the sandbox's processes
// together (three processes of 2.5 GiB each, or SysV shared memory that
// outlives them, beat a per-process address-space limit of 4 GiB). Each
// bwrap sandbox gets a cgroup of its own under the cgroup this process
// runs in, for memory (swap included), tasks and CPU bandwidth, and every
// bwrap of the sandbox starts inside it: in cgroup v2 through clone3's
// CLONE_INTO_CGROUP, in v1 hierarchies by moving the starting thread in
// for good and forking from there (v1 keeps a cgroup per thread, and a
// child inherits its parent thread's). Hosts that mount both (hybrid)
// get both: the v2 cgroup for membership and cgroup.kill, v1 for the
// controllers v2 lacks.

// cgroupControllers are the controllers a sandbox's cgroup needs.
var cgroupControllers = []string{"memory", "pids", "cpu"}

// cgroupHost says where this process can create sandbox cgroups. It is
// found once per process: the hierarchies and this process's place in
// them do not change under it.
type cgroupHost struct {
	v2    string            // directory in the v2 hierarchy that sandbox cgroups go under; "" without v2
	v2Has []string          // controllers the v2 directory gives its children
	v1    map[string]string // controller → directory in its v1 hierarchy that sandbox cgroups go under
	err   error             // why some controller is missing
}

var cgroupHostOnce = sync.OnceValue(findCgroups)

// cgroupMount is one cgroup filesystem in this mount namespace.
type cgroupMount struct {
	dir, root string
	v2        bool
	opts      []string // v1: the controllers it holds
}

func findCgroups() cgroupHost {
	h := cgroupHost{v1: map[string]string{}}
	mounts, err := cgroupMounts()
	if err != nil {
		h.err = fmt.Errorf("reading /proc/self/mountinfo: %w", err)
		return h
	}
	own, err := ownCgroups()
	if err != nil {
		h.err = fmt.Errorf("reading /proc/self/cgroup: %w", err)
		return h
	}
	var why []string
	for _, m := range mounts {
		if !m.v2 || h.v2 != "" {
			continue
		}
		p, ok := own[""]
		if !ok {
			continue
		}
		dir, ok := under(m, p)
		if !ok {
			continue
		}
		d, has, err := v2Parent(m.dir, dir)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		h.v2, h.v2Has = d, has
	}
	for _, c := range cgroupControllers {
		if slices.Contains(h.v2Has, c) {
			continue
		}
		found := false
		for _, m := range mounts {
			if m.v2 || !slices.Contains(m.opts, c) {
				continue
			}
			for key, p := range own {
				if !slices.Contains(strings.Split(key, ","), c) {
					continue
				}
				if dir, ok := under(m, p); ok && writable(dir) {
					h.v1[c], found = dir, true
				}
			}
		}
		if !found {
			why = append(why, fmt.Sprintf("the %s controller is in no cgroup hierarchy this process may create cgroups in", c))
		}
	}
	if len(why) > 0 && len(h.v1)+len(h.v2Has) < len(cgroupControllers) {
		h.err = errors.New(strings.Join(why, "; "))
	}
	return h
}

// under is where the cgroup p (a path from /proc/self/cgroup) lies in
// the mount m, which may show only a subtree of its hierarchy.
func under(m cgroupMount, p string) (string, bool) {
	rel, ok := strings.CutPrefix(p, strings.TrimSuffix(m.root, "/"))
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		return "", false
	}
	return filepath.Join(m.dir, rel), true
}

func writable(dir string) bool { return unix.Access(dir, unix.W_OK) == nil }

// v2Parent finds the directory of the v2 hierarchy that sandbox cgroups
// go under, and the controllers it gives them: this process's own cgroup
// if its controllers can be enabled for children there (v2 lets a cgroup
// with processes of its own pass on no controller, except the root), else
// the hierarchy's root, as only root can. Without any controller the own
// cgroup still serves for membership and cgroup.kill.
func v2Parent(mnt, own string) (string, []string, error) {
	var errs []string
	for _, d := range []string{own, mnt} {
		if !writable(d) {
			errs = append(errs, d+" is not writable")
			continue
		}
		avail, _ := os.ReadFile(filepath.Join(d, "cgroup.controllers"))
		var want []string
		for _, c := range strings.Fields(string(avail)) {
			if slices.Contains(cgroupControllers, c) {
				want = append(want, c)
			}
		}
		if len(want) == 0 && d == own {
			return own, nil, nil
		}
		var enable []string
		for _, c := range want {
			enable = append(enable, "+"+c)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0); err != nil {
			errs = append(errs, fmt.Sprintf("enabling %s for children of %s: %v", strings.Join(want, ", "), d, err))
			continue
		}
		return d, want, nil
	}
	return "", nil, fmt.Errorf("cgroup v2: %s", strings.Join(errs, "; "))
}

func cgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		switch b[0] {
		case "cgroup2":
			out = append(out, cgroupMount{dir: hostres.Unescape(a[4]), root: hostres.Unescape(a[3]), v2: true})
		case "cgroup":
			out = append(out, cgroupMount{dir: hostres.Unescape(a[4]), root: hostres.Unescape(a[3]), opts: strings.Split(b[2], ",")})
		}
	}
	return out, sc.Err()
}

// ownCgroups maps each hierarchy's controller list ("" for v2,
// "cpu,cpuacct", "name=systemd") to this process's cgroup in it.
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			own[parts[1]] = parts[2]
		}
	}
	return own, nil
}

// cgroup is one sandbox's cgroup, in each hierarchy that holds a
// controller it needs.
type cgroup struct {
	v2    string   // its v2 directory, "" without
	v2fd  *os.File // open on v2, for CLONE_INTO_CGROUP
	v1    []string // its v1 directories
	about string   // what it bounds, for Info().Reason
	// starts feeds the thread that starts commands inside the v1
	// cgroups (serve); nil without v1.
	starts chan startReq
	served chan struct{}    // closed once that thread has left the cgroups
	claims []*hostres.Claim // the records of its directories
}

// Cgroups says why this process cannot give a sandbox a cgroup of its
// own for its totals (nil where it can): then Start fails, unless
// Limits.Cgroup is CgroupOptional.
func Cgroups() error { return cgroupHostOnce().err }

// newCgroup creates a sandbox's cgroup with the limits l. Where the host
// offers none, it fails, or, with l.Cgroup optional, returns nil and the
// reason.
func newCgroup(l Limits) (*cgroup, string, error) {
	h := cgroupHostOnce()
	if h.err == nil {
		cg, err := h.create(l)
		if err == nil {
			return cg, "", nil
		}
		h.err = err
	}
	if l.Cgroup == CgroupOptional {
		why := "no cgroup (" + h.err.Error() + "): memory, processes and CPU are bounded per process only"
		slog.Warn("sandbox: "+why, "limits.cgroup", l.Cgroup)
		return nil, why, nil
	}
	return nil, "", fmt.Errorf("sandbox: no cgroup for the sandbox's total memory, processes and CPU: %v; run t1 as root on a host whose cgroup hierarchy (v2, or v1 memory, pids and cpu) is writable, or in a delegated cgroup (systemd: Delegate=yes), or set sandbox.limits.cgroup: optional to rely on per-process rlimits alone", h.err)
}

func (h cgroupHost) create(l Limits) (_ *cgroup, err error) {
	name := "t1-sandbox-" + newID()
	cg := &cgroup{}
	defer func() {
		if err != nil {
			cg.remove()
		}
	}()
	quota := int64(l.CPUs * 100000)
	set := func(dir, file, v string, optional bool) error {
		err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0)
		if err != nil && !(optional && errors.Is(err, os.ErrNotExist)) {
			return fmt.Errorf("sandbox: cgroup %s: %w", file, err)
		}
		return nil
	}
	limit := func(dir, c string, v2 bool) error {
		// The pages of the per-attempt tmpfs (disk.go) are charged to the
		// cgroup of the process that writes them: the disk budget is
		// memory too, so the limit covers both.
		mem := strconv.FormatInt(l.Memory+l.Disk, 10)
		switch {
		case c == "memory" && v2:
			if err := set(dir, "memory.max", mem, false); err != nil {
				return err
			}
			return set(dir, "memory.swap.max", "0", true)
		case c == "memory":
			if err := set(dir, "memory.limit_in_bytes", mem, false); err != nil {
				return err
			}
			return set(dir, "memory.memsw.limit_in_bytes", mem, true)
		case c == "pids":
			return set(dir, "pids.max", strconv.Itoa(l.Processes), false)
		case c == "cpu" && v2:
			return set(dir, "cpu.max", strconv.FormatInt(quota, 10)+" 100000", false)
		default:
			if err := set(dir, "cpu.cfs_period_us", "100000", false); err != nil {
				return err
			}
			return set(dir, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10), false)
		}
	}
	var kinds []string
	if h.v2 != "" {
		d := filepath.Join(h.v2, name)
		if err := cg.mkdir(d); err != nil {
			return nil, err
		}
		cg.v2 = d
		for _, c := range h.v2Has {
			if err := limit(d, c, true); err != nil {
				return nil, err
			}
		}
		if cg.v2fd, err = os.Open(d); err != nil {
			return nil, fmt.Errorf("sandbox: cgroup: %w", err)
		}
		kinds = append(kinds, "v2 "+strings.Join(append([]string{"membership"}, h.v2Has...), ", "))
	}
	var v1 []string
	for _, c := range cgroupControllers {
		parent, ok := h.v1[c]
		if !ok {
			continue
		}
		d := filepath.Join(parent, name)
		if !slices.Contains(cg.v1, d) {
			if err := cg.mkdir(d); err != nil {
				return nil, err
			}
			cg.v1 = append(cg.v1, d)
		}
		if err := limit(d, c, false); err != nil {
			return nil, err
		}
		v1 = append(v1, c)
	}
	if len(v1) > 0 {
		kinds = append(kinds, "v1 "+strings.Join(v1, ", "))
		cg.starts, cg.served = make(chan startReq), make(chan struct{})
		ready := make(chan error)
		go cg.serve(ready)
		if err := <-ready; err != nil {
			return nil, err
		}
	}
	cg.about = fmt.Sprintf("a cgroup of its own (%s): %s of memory without swap, %d tasks, %g CPUs in all",
		strings.Join(kinds, "; "), FormatSize(l.Memory), l.Processes, l.CPUs)
	return cg, nil
}

// mkdir makes the cgroup directory d, recorded (hostres) first.
func (cg *cgroup) mkdir(d string) error {
	c, err := hostres.Record(hostres.Cgroup, d, "sandbox cgroup")
	if err != nil {
		return fmt.Errorf("sandbox: cgroup: %w", err)
	}
	if err := os.Mkdir(d, 0o755); err != nil {
		c.Release()
		return fmt.Errorf("sandbox: cgroup: %w", err)
	}
	cg.claims = append(cg.claims, c)
	return nil
}

// start starts c inside the cgroup.
func (cg *cgroup) start(c *exec.Cmd) error {
	if cg.v2fd != nil {
		if c.SysProcAttr == nil {
			c.SysProcAttr = &syscall.SysProcAttr{}
		}
		c.SysProcAttr.UseCgroupFD = true
		c.SysProcAttr.CgroupFD = int(cg.v2fd.Fd())
	}
	if cg.starts == nil {
		return c.Start()
	}
	r := startReq{c: c, err: make(chan error, 1)}
	cg.starts <- r
	return <-r.err
}

type startReq struct {
	c   *exec.Cmd
	err chan error
}

// serve is the thread that starts the sandbox's commands under v1: it
// joins the v1 cgroups once and stays there, since moving a thread in
// and out for each fork takes the kernel's cgroup write lock twice per
// hierarchy (an RCU grace period each: milliseconds). When remove closes
// starts, the thread leaves the cgroups (they can then be removed), and
// remove kills what is left in them.
//
// The thread goes back to the runtime rather than end: it may have
// started processes of other sandboxes before this goroutine locked it,
// and Pdeathsig kills a process when the thread that started it ends.
// Only a thread that could not leave a cgroup ends, locked, with the
// goroutine.
func (cg *cgroup) serve(ready chan<- error) {
	defer close(cg.served)
	runtime.LockOSThread()
	tid := []byte(strconv.Itoa(unix.Gettid()))
	joined := 0
	defer func() {
		left := true
		for _, d := range cg.v1[:joined] {
			if err := os.WriteFile(filepath.Join(filepath.Dir(d), "tasks"), tid, 0); err != nil {
				slog.Warn("sandbox: leaving cgroup", "dir", d, "err", err)
				left = false
			}
		}
		if left {
			runtime.UnlockOSThread()
		}
	}()
	for _, d := range cg.v1 {
		if err := os.WriteFile(filepath.Join(d, "tasks"), tid, 0); err != nil {
			ready <- fmt.Errorf("sandbox: joining cgroup %s: %w", d, err)
			return
		}
		joined++
	}
	ready <- nil
	for r := range cg.starts {
		r.err <- r.c.Start()
	}
}

// remove kills every process left in the cgroup and removes it.
func (cg *cgroup) remove() {
	if cg.starts != nil {
		close(cg.starts)
		<-cg.served
	}
	procs := ""
	switch {
	case cg.v2 != "":
		procs = filepath.Join(cg.v2, "cgroup.procs")
		_ = os.WriteFile(filepath.Join(cg.v2, "cgroup.kill"), []byte("1"), 0)
	case len(cg.v1) > 0:
		procs = filepath.Join(cg.v1[0], "cgroup.procs")
	}
	self := os.Getpid()
	for end := time.Now().Add(5 * time.Second); procs != "" && time.Now().Before(end); {
		data, err := os.ReadFile(procs)
		live := 0
		for f := range strings.FieldsSeq(string(data)) {
			if pid, _ := strconv.Atoi(f); pid > 0 && pid != self {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				live++
			}
		}
		if err != nil || live == 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if cg.v2fd != nil {
		cg.v2fd.Close()
	}
	left := false
	for _, d := range append(slices.Clone(cg.v1), cg.v2) {
		if d == "" {
			continue
		}
		var err error
		// The thread of serve leaves its cgroups a moment after remove
		// has ended it.
		for range 2000 {
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			slog.Warn("sandbox: removing cgroup", "dir", d, "err", err)
			left = true
		}
	}
	if !left {
		for _, c := range cg.claims {
			c.Release()
		}
	}
}
