package hostres

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// plant writes an owner directory with entries, as a process o would
// have left it.
func plant(t *testing.T, reg string, o Owner, es ...Entry) string {
	t.Helper()
	d := filepath.Join(reg, o.name())
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(o)
	if err := os.WriteFile(filepath.Join(d, "owner"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		e.Seq = i + 1
		data, _ := json.Marshal(e)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("%09d.json", e.Seq)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// deadOwner is a process that has ended: a pid no process has now.
func deadOwner(t *testing.T) Owner {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return Owner{PID: c.Process.Pid, Start: 1, Boot: bootID(), UID: os.Geteuid()}
}

func exists(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil
}

func isMount(t *testing.T, p string) bool {
	ms, err := mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.dir == p {
			return true
		}
	}
	return false
}

// A dead owner's directory goes, with the tmpfs mounted in it (as
// root), its files and the link inside it; the link's target stays.
func TestReapRemovesWhatADeadOwnerLeft(t *testing.T) {
	base := t.TempDir()
	reg := filepath.Join(base, "owners")
	work := filepath.Join(base, "t1-sandbox-x")
	victim := filepath.Join(base, "victim")
	for _, d := range []string{work + "/fs/app", victim} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(work, "fs/app/f"), []byte("x"), 0o600)
	if err := os.Symlink(victim, filepath.Join(work, "fs/app/link")); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(base, "t1-layer-1")
	os.WriteFile(tmp, []byte("x"), 0o600)
	es := []Entry{{Kind: Dir, Path: work}, {Kind: File, Path: tmp}}
	mounted := false
	if os.Geteuid() == 0 {
		if err := unix.Mount("t1-sandbox-test", work+"/fs", "tmpfs", 0, "size=1m"); err == nil {
			mounted = true
			t.Cleanup(func() { _ = unix.Unmount(work+"/fs", unix.MNT_DETACH) })
			os.MkdirAll(work+"/fs/app", 0o700)
			os.WriteFile(work+"/fs/app/on-tmpfs", []byte("x"), 0o600)
			es = append(es, Entry{Kind: Mount, Path: work + "/fs", FS: "tmpfs", Source: "t1-sandbox-test"})
		}
	}
	d := plant(t, reg, deadOwner(t), es...)
	rep, err := Open(reg).Reap()
	if err != nil {
		t.Fatal(err)
	}
	if exists(work) || exists(tmp) || exists(d) {
		t.Fatalf("left: dir %v file %v record %v (%+v)", exists(work), exists(tmp), exists(d), rep)
	}
	if mounted && isMount(t, work+"/fs") {
		t.Fatal("tmpfs still mounted")
	}
	if !exists(filepath.Join(victim, "keep")) {
		t.Fatal("the link's target was removed")
	}
	if rep.Removed != len(es) || rep.Owners != 1 {
		t.Fatalf("report %+v, want %d removed of 1 owner (tmpfs mounted: %v)", rep, len(es), mounted)
	}
}

// A live owner keeps its records and resources, and so does an owner
// whose directory is another user's; a pid that lives on under another
// start time is a dead owner (pid reuse).
func TestReapLeavesLiveOwnersAndOtherUsers(t *testing.T) {
	base := t.TempDir()
	reg := filepath.Join(base, "owners")
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(base, "live")
	os.Mkdir(live, 0o700)
	liveDir := plant(t, reg, self, Entry{Kind: Dir, Path: live})
	reused := self
	reused.Start++
	gone := filepath.Join(base, "reused")
	os.Mkdir(gone, 0o700)
	plant(t, reg, reused, Entry{Kind: Dir, Path: gone})
	var other, otherDir string
	if os.Geteuid() == 0 {
		o := deadOwner(t)
		o.UID = 4242
		other = filepath.Join(base, "other")
		os.Mkdir(other, 0o700)
		otherDir = plant(t, reg, o, Entry{Kind: Dir, Path: other})
		if err := os.Chown(otherDir, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(reg).Reap(); err != nil {
		t.Fatal(err)
	}
	if !exists(live) || !exists(liveDir) {
		t.Fatal("a live owner's resource or record was removed")
	}
	if exists(gone) {
		t.Fatal("the resource of a pid reused by another process was kept")
	}
	if other != "" && (!exists(other) || !exists(otherDir)) {
		t.Fatal("another user's resource or record was removed")
	}
}

// A recorded path whose parent is a link now (planted after it was
// recorded) is not followed: what the link points to stays, and the
// record stays for an operator to see.
func TestReapRefusesLinks(t *testing.T) {
	base := t.TempDir()
	reg := filepath.Join(base, "owners")
	target := filepath.Join(base, "target")
	os.MkdirAll(filepath.Join(target, "t1-sandbox-y"), 0o700)
	os.WriteFile(filepath.Join(target, "t1-sandbox-y", "keep"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(target, "t1-layer-2"), []byte("x"), 0o600)
	if err := os.Symlink(target, filepath.Join(base, "tmp")); err != nil {
		t.Fatal(err)
	}
	d := plant(t, reg, deadOwner(t),
		Entry{Kind: Dir, Path: filepath.Join(base, "tmp", "t1-sandbox-y")},
		Entry{Kind: File, Path: filepath.Join(base, "tmp", "t1-layer-2")})
	rep, err := Open(reg).Reap()
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("err %v, want a refused link", err)
	}
	if !exists(filepath.Join(target, "t1-sandbox-y", "keep")) || !exists(filepath.Join(target, "t1-layer-2")) {
		t.Fatal("removed through a link")
	}
	if !exists(d) || len(rep.Failed) != 2 {
		t.Fatalf("records %v, failed %q", exists(d), rep.Failed)
	}
}

// Records are written before the resource exists, and released after;
// ReleaseOwn removes what the process still records.
func TestRecordReleaseAndReleaseOwn(t *testing.T) {
	base := t.TempDir()
	r := Open(filepath.Join(base, "owners"))
	p := filepath.Join(base, "made")
	c, err := r.Record(Entry{Kind: Dir, Path: p})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Own(); len(got) != 1 || got[0].Path != p {
		t.Fatalf("own %+v", got)
	}
	c.Release()
	if got := r.Own(); len(got) != 0 {
		t.Fatalf("own after release %+v", got)
	}
	if _, err := r.Record(Entry{Kind: Dir, Path: p}); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(p, "sub"), 0o700)
	if err := r.ReleaseOwn(); err != nil {
		t.Fatal(err)
	}
	if exists(p) || exists(r.own) {
		t.Fatalf("ReleaseOwn left %s %v, registry %v", p, exists(p), exists(r.own))
	}
	l, err := r.List()
	if err != nil || len(l.Owners) != 0 {
		t.Fatalf("list %+v %v", l.Owners, err)
	}
}

// A cgroup a dead owner left is removed, with a process still in it
// killed first (v2's cgroup.kill, or each pid under v1).
func TestReapRemovesCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("this host lacks the test's premise: creating cgroups needs root here")
	}
	var parent string
	for _, c := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup", "/sys/fs/cgroup/pids"} {
		var fs unix.Statfs_t
		if unix.Statfs(c, &fs) == nil && (fs.Type == unix.CGROUP2_SUPER_MAGIC || fs.Type == unix.CGROUP_SUPER_MAGIC) && unix.Access(c, unix.W_OK) == nil {
			parent = c
			break
		}
	}
	if parent == "" {
		t.Skip("this host lacks the test's premise: no writable cgroup file system")
	}
	cg := filepath.Join(parent, fmt.Sprintf("t1-sandbox-hostres-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("this host lacks the test's premise: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(cg) })
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = sleep.Wait(); close(done) }()
	t.Cleanup(func() { _ = sleep.Process.Kill() })
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(fmt.Sprint(sleep.Process.Pid)), 0); err != nil {
		t.Skipf("this host lacks the test's premise: moving a process into %s: %v", cg, err)
	}
	reg := filepath.Join(t.TempDir(), "owners")
	plant(t, reg, deadOwner(t), Entry{Kind: Cgroup, Path: cg})
	if _, err := Open(reg).Reap(); err != nil {
		t.Fatal(err)
	}
	if exists(cg) {
		t.Fatal("cgroup left")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the process in the cgroup is still alive")
	}
}

// Leaks finds what this process recorded and did not release (what a
// test binary's check fails on), removes it, and recording works again
// after it.
func TestLeaksFindsAndRemovesOwnRecords(t *testing.T) {
	t.Setenv("T1_RUNTIME_DIR", t.TempDir())
	defaultReg = sync.OnceValue(func() *Registry { return Open(RootDir()) })
	t.Cleanup(func() { defaultReg = sync.OnceValue(func() *Registry { return Open(RootDir()) }) })
	dir, release, err := MkdirTemp(t.TempDir(), "t1-test-", "a test's scratch")
	if err != nil {
		t.Fatal(err)
	}
	release()
	if own, _ := Leaks(); len(own) != 0 {
		t.Fatalf("released, yet leaks %q", own)
	}
	dir, _, err = MkdirTemp(t.TempDir(), "t1-test-", "a test's scratch")
	if err != nil {
		t.Fatal(err)
	}
	own, _ := Leaks()
	if len(own) != 1 || !strings.Contains(own[0], dir) {
		t.Fatalf("leaks %q, want %s", own, dir)
	}
	if exists(dir) {
		t.Fatal("Leaks did not remove what it found")
	}
	if _, _, err := MkdirTemp(t.TempDir(), "t1-test-", "after"); err != nil {
		t.Fatalf("recording after Leaks: %v", err)
	}
	Default().ReleaseOwn()
}

// List shows a live owner's tmpfs with what it holds, and WriteText says
// so with its age.
func TestListShowsLiveOwnerAndUsage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("this host lacks the test's premise: mounting a tmpfs needs root")
	}
	base := t.TempDir()
	r := Open(filepath.Join(base, "owners"))
	mnt := filepath.Join(base, "fs")
	os.Mkdir(mnt, 0o700)
	c, err := r.Record(Entry{Kind: Mount, Path: mnt, FS: "tmpfs", Source: "t1-sandbox-listtest"})
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("t1-sandbox-listtest", mnt, "tmpfs", 0, "size=8m"); err != nil {
		t.Skipf("this host lacks the test's premise: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH); c.Release(); r.ReleaseOwn() })
	if err := os.WriteFile(filepath.Join(mnt, "f"), make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Owners) != 1 || !l.Owners[0].Alive || l.Owners[0].Owner.PID != os.Getpid() || len(l.Owners[0].Resources) != 1 {
		t.Fatalf("owners %+v", l.Owners)
	}
	if got := l.Owners[0].Resources[0]; !got.Exists || got.Bytes < 2<<20 {
		t.Fatalf("resource %+v, want the tmpfs holding at least 2 MiB", got)
	}
	var b strings.Builder
	l.WriteText(&b)
	if !strings.Contains(b.String(), "alive") || !strings.Contains(b.String(), "2.0 MiB") || !strings.Contains(b.String(), mnt) {
		t.Fatalf("text:\n%s", b.String())
	}
}
