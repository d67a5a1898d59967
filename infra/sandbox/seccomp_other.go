//go:build !amd64

package sandbox

import (
	"fmt"
	"runtime"
)

func seccompSyscalls() (filterSyscalls, error) {
	return filterSyscalls{}, fmt.Errorf("sandbox: the bubblewrap backend's seccomp filter knows the x86_64 syscall table only, and this is %s: the sandbox is refused rather than run unfiltered", runtime.GOARCH)
}
