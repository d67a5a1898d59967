package sandbox

import (
	"fmt"
	"os"
	"os/exec"
)

// confineArgs confine every bwrap command of a sandbox without a block
// of ids beyond its namespaces: no further user namespaces inside (bwrap
// sets the new namespace's user.max_user_namespaces to 0), and the
// seccomp filter, read from the command's first extra file (fd 3). With
// a block, rangedArgs does the same in the sandbox's own namespace.
var confineArgs = []string{"--unshare-user", "--disable-userns", "--seccomp", "3"}

// confinement is what a bwrap sandbox adds to its commands' namespaces:
// the seccomp filter (every command) and its cgroup (nil where the host
// offers none and Limits.Cgroup allows that; noCgroup says why).
type confinement struct {
	cg       *cgroup
	noCgroup string
}

func newBwrapLauncher(bw *Bubblewrap, uid int, l Limits) (*bwrapLauncher, error) {
	switch l.Cgroup {
	case CgroupRequired, CgroupOptional:
	default:
		return nil, fmt.Errorf("sandbox: limits cgroup %q: want %s or %s", l.Cgroup, CgroupRequired, CgroupOptional)
	}
	cg, why, err := newCgroup(l)
	if err != nil {
		return nil, err
	}
	bl := &bwrapLauncher{bw: bw, uid: uid, confinement: confinement{cg: cg, noCgroup: why}}
	// Users need the cgroup: RLIMIT_NPROC counts each uid apart, so only
	// the cgroup's task limit bounds a sandbox whose root can become
	// many. Without one the sandbox keeps a single id, its block's first.
	if uid >= 0 && cg != nil {
		bl.ids = &idNamespaces{bin: bw.bin, base: uid}
	}
	return bl, nil
}

func (l *bwrapLauncher) close() {
	if l.ids != nil {
		l.ids.close()
	}
	l.confinement.close()
}

func (c *confinement) about() string {
	s := "a seccomp filter (no namespaces, mounts, keyrings, ptrace, bpf, perf, userfaultfd, io_uring, modules), no nested user namespaces; "
	if c.cg == nil {
		return s + c.noCgroup
	}
	return s + c.cg.about
}

// start implements starter: into the cgroup, then the parent's copy of
// the filter's pipe is closed.
func (c *confinement) start(cmd *exec.Cmd) error {
	defer closeFiles(cmd.ExtraFiles)
	if c.cg == nil {
		return cmd.Start()
	}
	return c.cg.start(cmd)
}

func (c *confinement) close() {
	if c.cg != nil {
		c.cg.remove()
	}
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
