package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter every bwrap command runs under. It is a deny list:
// the sandbox runs arbitrary programs, and what it must not reach is a
// short list of kernel interfaces through which a process leaves its
// namespaces or limits (new namespaces and mounts: a tmpfs in a nested
// user namespace escaped every limit), reads or drives other processes
// (ptrace, process_vm_*), or widens the kernel's attack surface for one
// unprivileged user (bpf, perf_event_open, userfaultfd, io_uring, keyrings,
// modules, kexec). ptrace is allowed, as Docker's default profile allows
// it from Linux 4.8 on (before 4.8 a tracer could change a syscall after
// the filter had passed it): a program's own PTRACE_TRACEME anti-debugging
// check, gdb and strace work. What it can reach is the sandbox's own
// processes: it runs in a pid namespace of its own, where no process
// outside can be named, without CAP_SYS_PTRACE, and every request on pid
// 1 (bwrap's init, which runs outside the filter) fails with EPERM.
// Before 4.8 ptrace stays denied. Denied calls fail with EPERM, which programs handle;
// clone3 fails with ENOSYS, since its flags sit behind a pointer the
// filter cannot read, and libc then falls back to clone, whose flags it
// can. Any other syscall ABI than the native one is refused: a deny list
// keyed by x86_64 numbers says nothing about i386 (int 0x80) numbers, so
// those kill the process, and x32 calls fail with ENOSYS.

// nsFlags are clone's namespace flags (CLONE_NEWTIME shares its bit with
// clone's exit signal, so it is checked for unshare only).
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// seccompArg0 is seccomp_data's args[0] (its low half: little endian);
// each argument takes 8 bytes.
const seccompArg0 = 16

// ptraceTraceme is PTRACE_TRACEME, the one request whose pid is ignored.
const ptraceTraceme = 0

var (
	seccompOnce sync.Once
	seccompBPF  []byte
	seccompErr  error
)

// seccompFilter returns the filter as bwrap's --seccomp reads it: an
// array of struct sock_filter in host byte order.
func seccompFilter() ([]byte, error) {
	seccompOnce.Do(func() { seccompBPF, seccompErr = assembleFilter() })
	return seccompBPF, seccompErr
}

func assembleFilter() ([]byte, error) {
	sys, err := seccompSyscalls()
	if err != nil {
		return nil, err
	}
	var a asm
	a.op(bpf.LoadAbsolute{Off: 4, Size: 4}) // arch
	a.jump(bpf.JumpNotEqual, sys.arch, lKill, lNext)
	a.op(bpf.LoadAbsolute{Off: 0, Size: 4}) // nr
	a.jump(bpf.JumpBitsSet, sys.x32Bit, lENOSYS, lNext)
	a.jump(bpf.JumpEqual, sys.clone3, lENOSYS, lNext)
	for _, c := range []struct{ nr, mask uint32 }{{sys.clone, nsFlags}, {sys.unshare, nsFlags | unix.CLONE_NEWTIME}} {
		a.jump(bpf.JumpNotEqual, c.nr, lAhead+3, lNext) // past the three below
		a.op(bpf.LoadAbsolute{Off: seccompArg0, Size: 4})
		a.jump(bpf.JumpBitsSet, c.mask, lEPERM, lNext)
		a.op(bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})
	}
	if sys.ptrace != 0 {
		// TRACEME (both halves 0) is allowed; any other request names
		// its pid in args[1], of which the kernel reads the low half
		// (pid_t): pid 1 is refused.
		a.jump(bpf.JumpNotEqual, sys.ptrace, lAhead+7, lNext) // past the seven below
		a.op(bpf.LoadAbsolute{Off: seccompArg0 + 4, Size: 4})
		a.jump(bpf.JumpNotEqual, 0, lAhead+2, lNext) // to the pid check
		a.op(bpf.LoadAbsolute{Off: seccompArg0, Size: 4})
		a.jump(bpf.JumpEqual, ptraceTraceme, lAhead+2, lNext) // to allow
		a.op(bpf.LoadAbsolute{Off: seccompArg0 + 8, Size: 4})
		a.jump(bpf.JumpEqual, 1, lEPERM, lNext)
		a.op(bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})
	}
	for _, nr := range sys.denied {
		a.jump(bpf.JumpEqual, nr, lEPERM, lNext)
	}
	return a.finish()
}

// Jump targets of asm: the next instruction, the shared returns at the
// end, or (lAhead+n) n instructions past the next.
const (
	lNext = iota
	lEPERM
	lENOSYS
	lKill
	lAhead
)

type asmJump struct {
	at     int
	t, f   int
	cond   bpf.JumpTest
	val    uint32
	placed bool
}

// asm assembles a straight-line program whose jumps go forward, to a
// shared return or a few instructions on.
type asm struct {
	ins   []bpf.Instruction
	jumps []asmJump
}

func (a *asm) op(i bpf.Instruction) { a.ins = append(a.ins, i) }

func (a *asm) jump(cond bpf.JumpTest, val uint32, t, f int) {
	a.jumps = append(a.jumps, asmJump{at: len(a.ins), t: t, f: f, cond: cond, val: val})
	a.ins = append(a.ins, nil)
}

func (a *asm) finish() ([]byte, error) {
	a.op(bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})
	end := len(a.ins)
	a.op(bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)})
	a.op(bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)})
	a.op(bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS})
	target := func(at, l int) (uint8, error) {
		var to int
		switch {
		case l == lNext:
			to = at + 1
		case l >= lAhead:
			to = at + 1 + (l - lAhead)
		default:
			to = end + l - lEPERM
		}
		skip := to - at - 1
		if skip < 0 || skip > 255 {
			return 0, fmt.Errorf("sandbox: seccomp filter: jump of %d instructions", skip)
		}
		return uint8(skip), nil
	}
	for _, j := range a.jumps {
		t, err := target(j.at, j.t)
		if err != nil {
			return nil, err
		}
		f, err := target(j.at, j.f)
		if err != nil {
			return nil, err
		}
		a.ins[j.at] = bpf.JumpIf{Cond: j.cond, Val: j.val, SkipTrue: t, SkipFalse: f}
	}
	raw, err := bpf.Assemble(a.ins)
	if err != nil {
		return nil, fmt.Errorf("sandbox: seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// seccompFile hands the filter to one bwrap: a pipe it reads to the end,
// filled before the command starts (the filter is far smaller than a
// pipe's buffer). The caller passes the returned file and closes it once
// the command has started.
func seccompFile() (*os.File, error) {
	prog, err := seccompFilter()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: seccomp filter: %w", err)
	}
	_, err = w.Write(prog)
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("sandbox: seccomp filter: %w", err)
	}
	return r, nil
}

// filterSyscalls are the numbers the filter treats specially, for one
// architecture.
type filterSyscalls struct {
	arch, x32Bit, clone, clone3, unshare uint32
	// ptrace is allowed but on pid 1 when set (Linux 4.8 or later), and
	// among denied otherwise.
	ptrace uint32
	denied []uint32
}

// kernelAtLeast says whether the running kernel's release is major.minor
// or later.
func kernelAtLeast(major, minor int) (bool, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false, fmt.Errorf("sandbox: seccomp filter: uname: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var maj, mnr int
	if _, err := fmt.Sscanf(rel, "%d.%d", &maj, &mnr); err != nil {
		return false, fmt.Errorf("sandbox: seccomp filter: kernel release %q: %w", rel, err)
	}
	return maj > major || (maj == major && mnr >= minor), nil
}
