package sandbox

import "golang.org/x/sys/unix"

func seccompSyscalls() (filterSyscalls, error) {
	denied := []uint32{unix.SYS_PTRACE}
	var ptrace uint32
	if ok, err := kernelAtLeast(4, 8); err != nil {
		return filterSyscalls{}, err
	} else if ok {
		denied, ptrace = nil, unix.SYS_PTRACE
	}
	return filterSyscalls{
		ptrace:  ptrace,
		arch:    unix.AUDIT_ARCH_X86_64,
		x32Bit:  0x40000000, // __X32_SYSCALL_BIT
		clone:   unix.SYS_CLONE,
		clone3:  unix.SYS_CLONE3,
		unshare: unix.SYS_UNSHARE,
		denied: append([]uint32{
			// namespaces and mounts
			unix.SYS_SETNS, unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT,
			unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_OPEN_TREE_ATTR, unix.SYS_FSOPEN,
			unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
			// keyrings
			unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
			// other processes
			unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
			// kernel attack surface
			unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
			unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
			unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE,
			unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE, unix.SYS_OPEN_BY_HANDLE_AT,
			// the host's clock, swap, accounting and console
			unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_ACCT,
			unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD, unix.SYS_SYSLOG, unix.SYS_SETTIMEOFDAY,
			unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_IOPL, unix.SYS_IOPERM,
			unix.SYS_VHANGUP, unix.SYS_USELIB, unix.SYS_LOOKUP_DCOOKIE,
		}, denied...),
	}, nil
}
