// Package hostfeature probes the kernel and host features that some tests
// take as their premise: i386 system calls on amd64, FUSE, the kernel
// overlay filesystem, root. The same test suite runs on hosts of one kind
// whose kernels are configured differently (a kernel without IA-32
// emulation faults on int 0x80 outside any sandbox; a container may have
// no /dev/fuse), so a test first asks whether its premise holds here and
// skips with the reason where it does not; where it holds, the guarantee
// is checked as before.
//
// It imports nothing of the project, so that a package's internal tests
// can use it too.
package hostfeature

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Require skips t with the reason when err, a probe's answer, is not nil.
func Require(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Skipf("this host lacks the test's premise: %v", err)
	}
}

// IA32Probe is a Python program that calls getpid through the i386 entry (int 0x80) from a page
// of its own: on an amd64 kernel with IA-32 emulation it prints the pid,
// without it the process dies of SIGSEGV.
const IA32Probe = `
import ctypes, mmap
m = mmap.mmap(-1, 4096, prot=7)
m.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))  # mov eax, 20 (getpid); int 0x80; ret
f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print("i386 getpid", f())
`

// IA32Syscalls reports whether a process of this host, outside any
// sandbox, can make an i386 system call (amd64 kernels built with
// CONFIG_IA32_EMULATION and not booted with ia32_emulation=0).
var IA32Syscalls = sync.OnceValue(func() error {
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("i386 system calls: the host is %s, not amd64", runtime.GOARCH)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		return fmt.Errorf("i386 system calls: no python3 to probe them with: %w", err)
	}
	out, err := exec.Command(py, "-c", IA32Probe).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "i386 getpid") {
		return fmt.Errorf("i386 system calls fail outside any sandbox (kernel without IA-32 emulation?): %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
})

// filesystems lists the filesystem types the running kernel knows.
func filesystems() (map[string]bool, error) {
	f, err := os.Open("/proc/filesystems")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 {
			out[fields[len(fields)-1]] = true
		}
	}
	return out, sc.Err()
}

// FUSE reports whether this process can serve a FUSE filesystem: the
// kernel knows fuse and /dev/fuse opens for reading and writing.
var FUSE = sync.OnceValue(func() error {
	fs, err := filesystems()
	if err != nil {
		return fmt.Errorf("FUSE: %w", err)
	}
	if !fs["fuse"] {
		return errors.New("FUSE: the kernel lists no fuse filesystem in /proc/filesystems")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("FUSE: %w", err)
	}
	f.Close()
	return nil
})

// KernelOverlay reports whether the kernel knows overlayfs.
var KernelOverlay = sync.OnceValue(func() error {
	fs, err := filesystems()
	if err != nil {
		return fmt.Errorf("overlayfs: %w", err)
	}
	if !fs["overlay"] {
		return errors.New("overlayfs: the kernel lists no overlay filesystem in /proc/filesystems")
	}
	return nil
})

// Root reports whether this process runs as root.
func Root() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root (euid %d)", os.Geteuid())
	}
	return nil
}
