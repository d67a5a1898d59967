package sandbox

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A process started with Pdeathsig is killed when the thread that
// started it ends. The thread a cgroup's serve locks may have started
// processes of other sandboxes before (a FUSE root, a plain command):
// serve hands it back to the runtime when it ends, so they live on.
func TestServeKeepsItsThread(t *testing.T) {
	started := make(chan *exec.Cmd, 1)
	onThread(func() {
		sleep := exec.Command("sleep", "60")
		sleep.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := sleep.Start(); err != nil {
			t.Error(err)
			started <- nil
			return
		}
		started <- sleep
		cg := &cgroup{starts: make(chan startReq), served: make(chan struct{})}
		close(cg.starts)
		ready := make(chan error, 1)
		cg.serve(ready)
		if err := <-ready; err != nil {
			t.Error(err)
		}
	})
	sleep := <-started
	if sleep == nil {
		return
	}
	exited := make(chan error, 1)
	go func() { exited <- sleep.Wait() }()
	// The goroutine has ended; had its thread ended too, the signal
	// would come now.
	select {
	case err := <-exited:
		t.Fatalf("the process the thread started ended with the serving goroutine: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	_ = sleep.Process.Kill()
	<-exited
}

// onThread runs f in a goroutine locked to a thread other than the main
// one, and returns once the goroutine has ended: with f's locks left
// over, the thread ends too (the main thread would only be parked).
func onThread(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if unix.Gettid() == os.Getpid() {
			// Held here, the main thread cannot take the next goroutine.
			onThread(f)
			runtime.UnlockOSThread()
			return
		}
		f()
		runtime.UnlockOSThread()
	}()
	<-done
}
