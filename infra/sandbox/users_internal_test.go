package sandbox

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// Without a cgroup (sandbox.limits.cgroup: optional on a host that has
// none) nothing would bound the tasks of a sandbox whose root can become
// many users, RLIMIT_NPROC counting each uid apart: the sandbox keeps a
// single id, and its Reason says why.
func TestBwrapWithoutCgroupKeepsOneID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a sandbox has a block of ids only when t1 runs as root")
	}
	bw := &Bubblewrap{}
	if err := bw.Available(); err != nil {
		t.Skip(err)
	}
	saved := cgroupHostOnce
	defer func() { cgroupHostOnce = saved }()
	cgroupHostOnce = func() cgroupHost { return cgroupHost{err: errors.New("no cgroup here")} }
	sb, err := bw.Start(context.Background(), Spec{Limits: Limits{Cgroup: CgroupOptional}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if why := sb.Info().Reason; !strings.Contains(why, "one user, root (uid 0) without capabilities") || !strings.Contains(why, "no cgroup") {
		t.Errorf("Reason %q does not say the sandbox has one user, and why", why)
	}
	r, err := sb.Exec(context.Background(), Cmd{Script: "id -u; touch /app/x; chown 1000 /app/x && echo CHOWNED; grep CapEff /proc/self/status"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stdout != "0\nCapEff:\t0000000000000000\n" {
		t.Errorf("a sandbox without a cgroup has users: %+v", r)
	}
}
