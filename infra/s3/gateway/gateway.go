package gateway

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/t1pipe/t1/infra/s3"
	"github.com/t1pipe/t1/infra/s3/embedded"
	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/embedgw"
)

// DefaultBucket is the bucket Start serves when none is named.
const DefaultBucket = embedded.DefaultBucket

// region is what the gateway reports; clients must sign with it.
const region = "us-east-1"

// startTimeout bounds how long Start waits for the gateway to answer.
const startTimeout = 30 * time.Second

// ErrRunning is returned, wrapped, by Start while another
// embedded gateway runs in this process. The gateway keeps process-wide
// state (including the working directory), so there can be only one.
var ErrRunning = errors.New("store: an embedded S3 gateway is already running in this process")

// Options configures Start: the same as a gateway process's.
type Options = embedded.Options

// Gateway is an S3 endpoint served from a local directory by an in-process
// gateway.
type Gateway struct {
	dir      string
	endpoint string
	cfg      s3.Config

	prevWD string
	cancel context.CancelFunc
	done   chan struct{}
	runErr error // set before done is closed

	closeOnce sync.Once
	closeErr  error
}

var (
	runningMu sync.Mutex
	running   *Gateway
)

// forceSidecar lets tests exercise the fallback for file systems without
// extended attributes on one that has them.
var forceSidecar bool

// Start starts an S3 gateway that serves opts.Bucket from opts.Dir
// and returns once the endpoint answers and the bucket exists. ctx bounds
// the start only; the gateway runs until Close.
//
// Each object is a plain file at <Dir>/<Bucket>/<key>, so local tools can
// read, for example, Parquet files in place. Object metadata is kept in
// extended attributes, or, where the file system has none, in a sibling
// directory .<base of Dir>-meta.
//
// Credentials are generated on the first start and kept in the file
// embedded.CredentialsPath(Dir), i.e. <Dir>-credentials.json next to Dir (mode 0600);
// later starts on the same Dir reuse them, so configurations handed to other
// processes stay valid across restarts.
//
// WORKING DIRECTORY: the gateway's file backend changes the process's
// working directory to Dir and resolves object paths relative to it. While
// the gateway runs, the whole process has Dir as its working directory:
// relative paths anywhere in the program resolve against Dir, and any
// os.Chdir elsewhere corrupts the store. Use absolute paths. Close restores
// the previous working directory.
//
// Only one embedded gateway can run per process; a second Start
// before Close returns an error wrapping ErrRunning. Close followed
// by Start is supported.
func Start(ctx context.Context, opts Options) (*Gateway, error) {
	if opts.Dir == "" {
		return nil, errors.New("store: start embedded: no directory given")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("store: start embedded: %w", err)
	}

	runningMu.Lock()
	defer runningMu.Unlock()
	if running != nil {
		return nil, fmt.Errorf("store: start embedded in %s: %w (serving %s)", dir, ErrRunning, running.dir)
	}

	e, err := start(ctx, dir, opts)
	if err != nil {
		return nil, err
	}
	running = e
	return e, nil
}

func start(ctx context.Context, dir string, opts Options) (*Gateway, error) {
	host := cmp.Or(opts.Host, "127.0.0.1")
	bucket := cmp.Or(opts.Bucket, DefaultBucket)

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: start embedded: %w", err)
	}
	access, secret, err := loadOrCreateCredentials(embedded.CredentialsPath(dir))
	if err != nil {
		return nil, err
	}
	ms, popts, err := metadataStore(dir)
	if err != nil {
		return nil, err
	}
	prevWD, _ := os.Getwd()

	// Probing for a free port and then binding it races with other
	// listeners; a port we picked ourselves is worth a few more tries.
	attempts := 1
	if opts.Port == 0 {
		attempts = 3
	}
	var lastErr error
	for range attempts {
		port := opts.Port
		if port == 0 {
			if port, err = freePort(host); err != nil {
				return nil, fmt.Errorf("store: start embedded: %w", err)
			}
		}
		e := &Gateway{
			dir:      dir,
			endpoint: net.JoinHostPort(clientHost(host), strconv.Itoa(port)),
			prevWD:   prevWD,
		}
		e.cfg = s3.Config{
			Endpoint:  e.endpoint,
			Bucket:    bucket,
			Region:    region,
			AccessKey: access,
			SecretKey: secret,
		}
		lastErr = e.run(ctx, ms, popts, net.JoinHostPort(host, strconv.Itoa(port)))
		if lastErr == nil {
			return e, nil
		}
		if ctx.Err() != nil || !isAddrInUse(lastErr) {
			break
		}
	}
	restoreWD(prevWD)
	return nil, lastErr
}

// run starts the gateway on addr and waits until it serves the bucket.
func (e *Gateway) run(ctx context.Context, ms meta.MetadataStorer, popts posix.PosixOpts, addr string) error {
	be, err := posix.New(e.dir, ms, popts)
	if err != nil {
		return fmt.Errorf("store: start embedded in %s: %w", e.dir, err)
	}
	gwCfg := &embedgw.Config{
		RootUserAccess:    e.cfg.AccessKey,
		RootUserSecret:    e.cfg.SecretKey,
		Region:            region,
		Ports:             []string{addr},
		MaxConnections:    1024,
		MaxRequests:       1024,
		MultipartMaxParts: 10000,
		Quiet:             true,
	}
	runCtx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		e.runErr = embedgw.RunVersityGW(runCtx, be, gwCfg)
	}()

	err = e.waitReady(ctx)
	if err == nil {
		return nil
	}
	cancel()
	<-e.done
	// RunVersityGW releases the backend only on its normal exit path.
	be.Shutdown()
	switch {
	case e.runErr != nil && isAddrInUse(e.runErr):
		return fmt.Errorf("store: start embedded gateway on %s: %w", addr, syscall.EADDRINUSE)
	case e.runErr != nil:
		return fmt.Errorf("store: start embedded gateway on %s: %w", addr, e.runErr)
	}
	return err
}

// waitReady polls the endpoint until it answers and the bucket exists, the
// gateway exits, ctx ends, or startTimeout passes.
func (e *Gateway) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	// Something else may hold the port and accept connections without
	// answering; stop waiting on it as soon as the gateway gives up.
	go func() {
		select {
		case <-e.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := s3.Open(ctx, e.cfg)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			// The gateway is up but refuses us, or something else is
			// wrong: waiting longer will not help.
			select {
			case <-e.done:
			default:
				return err
			}
		}
		select {
		case <-e.done:
			return fmt.Errorf("store: embedded gateway on %s exited during start", e.endpoint)
		case <-ctx.Done():
			return fmt.Errorf("store: embedded gateway on %s not ready: %w (last error: %v)", e.endpoint, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// Endpoint returns the host:port clients connect to.
func (e *Gateway) Endpoint() string { return e.endpoint }

// Dir returns the absolute directory holding the bucket directories.
func (e *Gateway) Dir() string { return e.dir }

// Config returns a configuration for Open that reaches this gateway.
func (e *Gateway) Config() s3.Config { return e.cfg }

// Close stops the gateway, waits until it has shut down, and restores the
// working directory the process had before Start. It returns the
// gateway's error if it stopped for a reason other than Close. Close is
// idempotent.
func (e *Gateway) Close() error {
	e.closeOnce.Do(func() {
		e.cancel()
		<-e.done
		restoreWD(e.prevWD)
		if e.runErr != nil {
			e.closeErr = fmt.Errorf("store: embedded gateway on %s: %w", e.endpoint, e.runErr)
		}
		runningMu.Lock()
		if running == e {
			running = nil
		}
		runningMu.Unlock()
	})
	return e.closeErr
}

func restoreWD(dir string) {
	if dir == "" {
		return
	}
	if err := os.Chdir(dir); err != nil {
		slog.Warn("store: cannot restore working directory after embedded gateway", "dir", dir, "err", err)
	}
}

type credentialsFile struct {
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

func loadOrCreateCredentials(path string) (access, secret string, err error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var c credentialsFile
		if err := json.Unmarshal(b, &c); err != nil || c.AccessKey == "" || c.SecretKey == "" {
			return "", "", fmt.Errorf("store: credentials file %s is malformed; delete it to generate new credentials", path)
		}
		// Files copied around lose their mode; the secret stays private.
		if err := os.Chmod(path, 0o600); err != nil {
			return "", "", fmt.Errorf("store: credentials file: %w", err)
		}
		return c.AccessKey, c.SecretKey, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", "", fmt.Errorf("store: credentials file: %w", err)
	}

	c := credentialsFile{AccessKey: "T1" + rand.Text()[:18], SecretKey: rand.Text() + rand.Text()}
	b, err = json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", "", err
	}
	// Write then rename so that a crash never leaves a half-written file
	// that would lock us out of our own objects.
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return "", "", fmt.Errorf("store: credentials file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", "", fmt.Errorf("store: credentials file: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", "", fmt.Errorf("store: credentials file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", "", fmt.Errorf("store: credentials file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", "", fmt.Errorf("store: credentials file: %w", err)
	}
	return c.AccessKey, c.SecretKey, nil
}

// metadataStore prefers extended attributes, which keep the object
// directory free of anything but object files, and falls back to a sidecar
// directory next to dir (".<base>-meta") on file systems without them.
func metadataStore(dir string) (meta.MetadataStorer, posix.PosixOpts, error) {
	if err := (meta.XattrMeta{}).Test(dir); err == nil && !forceSidecar {
		return meta.XattrMeta{}, posix.PosixOpts{}, nil
	}
	// The backend refuses a sidecar path that merely starts with the root's
	// path string, so "<dir>-meta" is out; a leading dot avoids that.
	side := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+"-meta")
	if err := os.MkdirAll(side, 0o755); err != nil {
		return nil, posix.PosixOpts{}, fmt.Errorf("store: start embedded: %w", err)
	}
	sc, err := meta.NewSideCar(side)
	if err != nil {
		return nil, posix.PosixOpts{}, fmt.Errorf("store: start embedded: sidecar metadata in %s: %w", side, err)
	}
	slog.Info("store: no extended attributes; keeping object metadata in a sidecar directory", "dir", side)
	return sc, posix.PosixOpts{SideCarDir: side}, nil
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// clientHost maps a wildcard listen address to one clients can dial.
func clientHost(host string) string {
	ip := net.ParseIP(host)
	switch {
	case host == "":
		return "127.0.0.1"
	case ip == nil || !ip.IsUnspecified():
		return host
	case ip.To4() != nil:
		return "127.0.0.1"
	default:
		return "::1"
	}
}

func isAddrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}
