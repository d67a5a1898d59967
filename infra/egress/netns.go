package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// ListenIn makes a listening socket on port Port of every address in the
// network namespace of process pid (a sandbox's, which has loopback
// only) and returns it as a listener of this process. It needs host
// root: entering another user namespace's network namespace takes
// CAP_SYS_ADMIN over both.
func ListenIn(pid int) (net.Listener, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("egress: reaching into a sandbox's network namespace needs host root (setns); run t1 as root, or use network none")
	}
	target, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("egress: sandbox network namespace: %w", err)
	}
	defer unix.Close(target)
	fd, err := socketIn(target)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "egress")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	return l, nil
}

// socketIn creates, binds and listens on a TCP socket in the network
// namespace target, from a thread that enters it and comes back. A
// thread that cannot come back stays locked, so the runtime ends it
// with its goroutine rather than reuse it in the wrong namespace.
func socketIn(target int) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("egress: own network namespace: %w", err)}
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{-1, fmt.Errorf("egress: entering the sandbox's network namespace: %w", err)}
			return
		}
		fd, err := listenAny()
		if err := unix.Setns(self, unix.CLONE_NEWNET); err != nil {
			// Locked for good: the thread exits with this goroutine.
			if fd >= 0 {
				unix.Close(fd)
			}
			ch <- result{-1, fmt.Errorf("egress: leaving the sandbox's network namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{fd, err}
	}()
	r := <-ch
	return r.fd, r.err
}

// listenAny listens on 0.0.0.0:Port. Any address rather than 127.0.0.1:
// bwrap brings the namespace's loopback up only after the socket is
// made, and loopback is all the namespace has.
func listenAny() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("egress: socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err == nil {
		if err = unix.Bind(fd, &unix.SockaddrInet4{Port: Port}); err == nil {
			if err = unix.Listen(fd, 128); err == nil {
				return fd, nil
			}
		}
		unix.Close(fd)
		return -1, fmt.Errorf("egress: listening in the sandbox: %w", err)
	}
	unix.Close(fd)
	return -1, fmt.Errorf("egress: socket option: %w", err)
}
