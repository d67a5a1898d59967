package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestControlFilesNeverFollowLinks: a shell's control files live in
// ctl/, which the sandbox's host uid could write when it owned it. A link
// planted there as <n>.sh made the host, running as root, truncate and
// overwrite the link's target with the next command and chown it to the
// sandbox's uid. Planted by the sandbox's uid, or found already there,
// the link must leave its target alone.
func TestControlFilesNeverFollowLinks(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the sandbox then runs as a host uid of its own")
	}
	bw := &Bubblewrap{}
	if err := errors.Join(bw.Available(), Cgroups()); err != nil {
		t.Skipf("bubblewrap cannot confine a sandbox here: %v", err)
	}
	for _, plantAs := range []string{"sandbox uid", "root"} {
		t.Run(plantAs, func(t *testing.T) {
			victim := filepath.Join(t.TempDir(), "root-only")
			if err := os.WriteFile(victim, []byte("host secret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			sb, err := bw.Start(context.Background(), Spec{})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Close()
			b := sb.(*box)
			sh, err := sb.Shell(context.Background(), ShellOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer sh.Close()
			for n := 1; n <= 8; n++ {
				for _, ext := range []string{".sh", ".in"} {
					link := filepath.Join(b.ctlDir, strconv.Itoa(n)+ext)
					cmd := exec.Command("ln", "-sf", victim, link)
					if plantAs == "sandbox uid" {
						cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(b.uid), Gid: uint32(b.gid), NoSetGroups: true}}
					}
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Logf("planting %s as %s: %v %s", link, plantAs, err, out)
					}
				}
			}
			for range 3 {
				_, _ = sh.Run(context.Background(), "echo overwritten", RunOptions{Stdin: strings.NewReader("stdin\n")})
			}
			data, err := os.ReadFile(victim)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != "host secret\n" {
				t.Errorf("a control-file link overwrote the host file: %q", data)
			}
			var st syscall.Stat_t
			if err := syscall.Stat(victim, &st); err != nil {
				t.Fatal(err)
			}
			if st.Uid != 0 {
				t.Errorf("a control-file link chowned the host file to uid %d", st.Uid)
			}
		})
	}
}

// TestBindSourcesBoundByDescriptor: whatever replaces a bind source's
// path after the sandbox was made (here the host itself, standing in for
// any slip that lets a link in) does not change what commands see: bwrap
// binds the directories by the descriptors opened when they were made.
// It counts the process's descriptors, so it runs alone: serial tests
// never overlap the parallel ones.
func TestBindSourcesBoundByDescriptor(t *testing.T) {
	bw := &Bubblewrap{}
	if err := errors.Join(bw.Available(), Cgroups()); err != nil {
		t.Skipf("bubblewrap cannot confine a sandbox here: %v", err)
	}
	sb, err := bw.Start(context.Background(), Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	b := sb.(*box)
	if r, err := sb.Exec(context.Background(), Cmd{Script: "echo mine > /var/tmp/mark"}); err != nil || r.ExitCode != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	src := filepath.Join(b.fsDir, "var", "tmp")
	if err := os.Rename(src, src+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", src); err != nil {
		t.Fatal(err)
	}
	r, err := sb.Exec(context.Background(), Cmd{Script: "ls /var/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the swap: exit %d, stdout %q, stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	if strings.Contains(r.Stdout, "usr\n") || strings.Contains(r.Stdout, "proc\n") {
		t.Errorf("/var/tmp shows the host's root after its path was swapped for a link:\n%s", r.Stdout)
	}
	if r.ExitCode == 0 && !strings.Contains(r.Stdout, "mark") {
		t.Errorf("/var/tmp is not the sandbox's own directory: %q", r.Stdout)
	}
	// Each command's duplicates of the descriptors are closed once it
	// has started.
	before := openFDs(t)
	for range 10 {
		if _, err := sb.Exec(context.Background(), Cmd{Script: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	if after := openFDs(t); after > before+2 {
		t.Errorf("10 commands left %d descriptors open (%d before)", after, before)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
