// Package embedded runs t1's embedded object store, the S3 gateway of
// package gateway, in a process of its own, and is all a program that
// uses the store needs to link.
//
// The process is the program's own executable started again with Env set
// in its environment; its main answers by serving (gateway.ServeChild,
// the first thing t1's main does). A process of its own, because the
// gateway's file backend makes its directory the working directory of the
// process it runs in, where every relative path of the program would then
// resolve; and because the gateway brings some three hundred packages
// that only the binary which serves it needs to link.
//
//	parent (Start)                         child (Env=<Options as JSON>)
//	stdin   ── pipe, held until Close ──▶  serves until it reads EOF: the parent
//	                                       closed it, or exited in any way
//	fd 3    ◀── one Handshake as JSON ──   then closed
//	stdout                                 /dev/null (the gateway's own notes)
//	stderr  ◀── kept, the last 4 KiB ───   the reason it could not start or stop
//
// The child has a process group of its own: a terminal's interrupt is for
// the parent, which still writes to the store while it shuts down.
package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/s3"
)

// Env names the environment variable that makes t1's executable serve the
// gateway instead of running a command. Its value is Options as JSON.
const Env = "T1_EMBEDDED_S3"

// DefaultBucket is the bucket served when Options names none.
const DefaultBucket = "t1-data"

// Options configures the gateway.
type Options struct {
	// Dir holds the objects, e.g. <data>/s3. It is created if missing.
	Dir string
	// Host is the address to listen on; default 127.0.0.1.
	Host string
	// Port to listen on; 0 picks a free one.
	Port int
	// Bucket to serve; default DefaultBucket. It is created if missing.
	Bucket string
}

// Handshake is what the child writes to fd 3 once: the configuration that
// reaches it, or why it does not serve.
type Handshake struct {
	Config s3.Config `json:",omitzero"`
	Error  string    `json:",omitempty"`
}

// Executable, when set, names the program Start runs as the gateway in
// place of this process's own executable: a test binary cannot serve it
// (internal/testinfra sets its gatewayd, built on first use).
var Executable func() (string, error)

// startTimeout bounds the wait for the child's handshake.
const startTimeout = time.Minute

// closeTimeout bounds the wait for the child to stop after Close.
const closeTimeout = 30 * time.Second

// CredentialsPath is the file in which the gateway keeps its credentials
// for dir: <dir>-credentials.json, outside dir so that it can never be
// served as an object.
func CredentialsPath(dir string) string {
	return filepath.Clean(dir) + "-credentials.json"
}

// Store is a running gateway process.
type Store struct {
	cmd      *exec.Cmd
	lifeline *os.File
	stderr   *tail
	cfg      s3.Config
	done     chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Start runs the gateway over o.Dir in a child process and returns once it
// serves o.Bucket; ctx bounds the start only.
func Start(ctx context.Context, o Options) (*Store, error) {
	if _, child := os.LookupEnv(Env); child {
		return nil, errors.New("store: a process serving the embedded S3 gateway cannot start another")
	}
	if o.Dir == "" {
		return nil, errors.New("store: start embedded: no directory given")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("store: start embedded: %w", err)
	}
	o.Dir = dir
	exe, err := executable()
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	hr, hw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("store: start embedded: %w", err)
	}
	defer hr.Close()
	lr, lw, err := os.Pipe()
	if err != nil {
		hw.Close()
		return nil, fmt.Errorf("store: start embedded: %w", err)
	}
	s := &Store{stderr: &tail{}, lifeline: lw, done: make(chan struct{})}
	s.cmd = exec.Command(exe)
	s.cmd.Env = append(os.Environ(), Env+"="+string(spec))
	s.cmd.Stdin = lr
	s.cmd.Stderr = s.stderr
	s.cmd.ExtraFiles = []*os.File{hw}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = s.cmd.Start()
	hw.Close()
	lr.Close()
	if err != nil {
		lw.Close()
		return nil, fmt.Errorf("store: start embedded gateway %s: %w", exe, err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()

	got := make(chan Handshake, 1)
	go func() {
		var h Handshake
		if err := json.NewDecoder(hr).Decode(&h); err != nil {
			h.Error = "it exited without serving"
		}
		got <- h
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var h Handshake
	select {
	case h = <-got:
	case <-ctx.Done():
		h.Error = "it did not answer: " + ctx.Err().Error()
	}
	if h.Error != "" {
		s.kill()
		return nil, fmt.Errorf("store: embedded S3 gateway over %s: %s%s", dir, h.Error, s.stderr.reason())
	}
	s.cfg = h.Config
	return s, nil
}

func executable() (string, error) {
	get := Executable
	if get == nil {
		if testing.Testing() {
			return "", errors.New("store: a test binary cannot serve the embedded S3 gateway: set embedded.Executable (testinfra.Main and Run do)")
		}
		get = os.Executable
	}
	exe, err := get()
	if err != nil {
		return "", fmt.Errorf("store: the executable to serve the embedded S3 gateway: %w", err)
	}
	return exe, nil
}

// Config returns a configuration for s3.Open that reaches the gateway.
func (s *Store) Config() s3.Config { return s.cfg }

// Endpoint returns the host:port clients connect to.
func (s *Store) Endpoint() string { return s.cfg.Endpoint }

// Close stops the gateway and waits for its process to exit; it returns
// the reason if the process failed. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.lifeline.Close()
		select {
		case <-s.done:
		case <-time.After(closeTimeout):
			s.kill()
			s.closeErr = fmt.Errorf("store: embedded S3 gateway did not stop within %s; killed", closeTimeout)
			return
		}
		if st := s.cmd.ProcessState; st != nil && !st.Success() {
			s.closeErr = fmt.Errorf("store: embedded S3 gateway: %s%s", st, s.stderr.reason())
		}
	})
	return s.closeErr
}

func (s *Store) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
	s.lifeline.Close()
}

// tail keeps the last 4 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf) - 4096; n > 0 {
		t.buf = t.buf[n:]
	}
	return len(p), nil
}

func (t *tail) reason() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := strings.TrimSpace(string(bytes.ToValidUTF8(t.buf, nil))); s != "" {
		return ": " + s
	}
	return ""
}
