package testinfra

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/t1pipe/t1/infra/s3"
)

// gatewayDir is the shared gateway's state directory: the start lock,
// the users lock, gateway.json (its s3.Config), its binary and its
// objects (s3/). One per user, so that test runs of two users never meet.
func gatewayDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("t1-test-gateway-%d", os.Getuid()))
}

// startLock makes gatewayDir and takes its start lock, under which the
// gateway's binaries are built and the shared gateway is found or
// started; closing the file lets go of it.
func startLock() (string, *os.File, error) {
	dir := gatewayDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	// Another user's directory, or a link planted in its place, is not ours.
	if fi, err := os.Lstat(dir); err != nil {
		return "", nil, err
	} else if st, ok := fi.Sys().(*syscall.Stat_t); !ok || !fi.IsDir() || int(st.Uid) != os.Getuid() {
		return "", nil, fmt.Errorf("%s is not a directory of this user", dir)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		return "", nil, err
	}
	return dir, lock, nil
}

// useGateway finds the machine's shared test gateway, or builds and
// starts one, and returns a configuration for a bucket of this test
// binary's own. The gateway keeps running while release has not been
// called (or the process lives); release removes the bucket.
func useGateway() (s3.Config, func() error, error) {
	dir, lock, err := startLock()
	if err != nil {
		return s3.Config{}, nil, err
	}
	defer lock.Close()
	// Held until this process exits: the gateway stops only once no test
	// binary holds it.
	users, err := os.OpenFile(filepath.Join(dir, "users"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return s3.Config{}, nil, err
	}
	if err := unix.Flock(int(users.Fd()), unix.LOCK_SH); err != nil {
		users.Close()
		return s3.Config{}, nil, err
	}
	cfg, err := runningGateway(dir)
	if err != nil {
		if cfg, err = startGateway(dir); err != nil {
			users.Close()
			return s3.Config{}, nil, err
		}
	}
	// A bucket per test binary: the gateway outlives the binaries that
	// use it, and a test may own the whole of its bucket.
	cfg.Bucket = "t1-test-" + strings.ToLower(rand.Text()[:12])
	release := func() error {
		defer users.Close()
		// The gateway keeps objects as plain files under <dir>/s3/<bucket>.
		return os.RemoveAll(filepath.Join(dir, "s3", cfg.Bucket))
	}
	return cfg, release, nil
}

// runningGateway is the configuration of the gateway that answers as
// gateway.json says, if one does.
func runningGateway(dir string) (s3.Config, error) {
	var cfg s3.Config
	b, err := os.ReadFile(filepath.Join(dir, "gateway.json"))
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return cfg, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = s3.Open(ctx, cfg)
	return cfg, err
}

// Gatewayd is the program that serves the embedded gateway of t1 code a
// test runs in process (embedded.Start): a test binary cannot, so it is
// testinfra's gatewayd, built once per test binary under the start lock,
// to a name of its own: the shared gateway may be running its binary.
var Gatewayd = sync.OnceValues(func() (string, error) {
	dir, lock, err := startLock()
	if err != nil {
		return "", err
	}
	defer lock.Close()
	return build(dir, "gatewayd-embedded", "./internal/testinfra/gatewayd")
})

// startGateway builds gatewayd (go build relinks only what changed) and
// starts it in a session of its own, so that it outlives this process
// and the signals sent to its process group.
func startGateway(dir string) (s3.Config, error) {
	bin, err := build(dir, "gatewayd", "./internal/testinfra/gatewayd")
	if err != nil {
		return s3.Config{}, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "gatewayd.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return s3.Config{}, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-dir", dir)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return s3.Config{}, err
	}
	if err := cmd.Start(); err != nil {
		return s3.Config{}, err
	}
	// The gateway prints notes of its own before.
	ready, lines := false, bufio.NewScanner(out)
	for !ready && lines.Scan() {
		ready = lines.Text() == "ready"
	}
	// Reaped here while this process lives, by init after.
	go cmd.Wait()
	if !ready {
		log, _ := os.ReadFile(logf.Name())
		return s3.Config{}, fmt.Errorf("gatewayd did not start: %s", strings.TrimSpace(string(log)))
	}
	return runningGateway(dir)
}
