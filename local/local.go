// Package local brings up what a t1 process needs from its configuration:
// the bus (embedded nats-server or an external cluster), the object store
// (embedded S3 gateway or any S3), telemetry, and the event log on top.
//
// An embedded data directory belongs to one process at a time, guarded by
// an exclusive lock on <data>/lock. The owner writes <data>/endpoints.json;
// any other t1 process pointed at the same directory reads it and connects
// to the owner's servers as a client, so `t1 status` works beside
// `t1 infra up` or `t1 run`.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/bus"
	"github.com/t1pipe/t1/infra/s3"
	"github.com/t1pipe/t1/infra/s3/embedded"
	"github.com/t1pipe/t1/infra/telemetry"
	"github.com/t1pipe/t1/store"
)

// Endpoints is the content of <data>/endpoints.json.
type Endpoints struct {
	PID int `json:"pid"`
	// NATS is the client URL, usable with `nats --server`.
	NATS string `json:"nats"`
	// S3 is the gateway's host:port (plain HTTP).
	S3     string `json:"s3"`
	Bucket string `json:"bucket"`
	// Credentials is the file holding the gateway's access keys.
	Credentials string    `json:"credentials"`
	Started     time.Time `json:"started"`
	// Transient marks an owner that is a short-lived command (status, a
	// query): a long-lived process waits for it to exit and takes over,
	// rather than attaching to servers that are about to stop.
	Transient bool `json:"transient,omitempty"`
}

// EndpointsPath is where the owner of dataDir writes its endpoints.
func EndpointsPath(dataDir string) string { return filepath.Join(dataDir, "endpoints.json") }

// Infra is a connected bus, store and event log.
type Infra struct {
	Config    config.Config
	DataDir   string
	Conn      *nats.Conn
	Log       *engine.Log
	Store     store.ObjectStore
	Endpoints Endpoints
	// Owner is true when this process runs the embedded servers.
	Owner bool
	// WorkDir is the working directory Open was called in, against which
	// relative paths of the configuration resolve.
	WorkDir string

	closers []func()
}

// Options adjusts Open.
type Options struct {
	// NoStore skips the object store (commands that only read events).
	NoStore bool
	// Serve marks a long-lived process (a pipeline, `infra up`) that other
	// t1 processes attach to. Without it the process owns the embedded
	// servers only for its own short life, and a Serve process that starts
	// meanwhile waits for it instead of attaching.
	Serve  bool
	Logger *slog.Logger
}

// takeoverWait bounds how long Open waits for a transient owner to exit.
const takeoverWait = 30 * time.Second

// Open connects everything cfg describes. cfg.Data must already carry any
// --data/T1_DATA override. Close releases it all.
func Open(ctx context.Context, cfg config.Config, o Options) (_ *Infra, err error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	dataDir, err := filepath.Abs(cfg.Data)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("working directory: %w", err)
	}
	in := &Infra{Config: cfg, DataDir: dataDir, WorkDir: wd}
	defer func() {
		if err != nil {
			in.Close()
		}
	}()
	prov, err := telemetry.Setup(ctx, cfg.Telemetry)
	if err != nil {
		return nil, err
	}
	in.closers = append(in.closers, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = prov.Shutdown(sctx)
	})

	embedded := cfg.Bus.Mode == config.Embedded || (!o.NoStore && cfg.Store.Mode == config.Embedded)
	var peer *Endpoints
	if embedded {
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		owner, err := lock(dataDir)
		if err != nil {
			return nil, err
		}
		if owner == nil {
			if owner, peer, err = attach(dataDir); err != nil {
				return nil, err
			}
		}
		if peer != nil {
			// A transient owner serves only what it needed: wait for it
			// rather than attach to servers that stop in a moment.
			if peer.Transient && (o.Serve || (!o.NoStore && peer.S3 == "")) {
				log.Debug("data directory briefly owned by a short-lived t1 command; waiting for it", "pid", peer.PID)
				if owner, err = waitLock(ctx, dataDir, takeoverWait); err != nil {
					return nil, err
				}
				if owner == nil {
					return nil, fmt.Errorf("data directory %s is still held by process %d after %s", dataDir, peer.PID, takeoverWait)
				}
				peer = nil
			}
		}
		if owner != nil {
			in.Owner = true
			in.closers = append(in.closers, func() { owner.Close() })
		} else {
			log.Debug("data directory owned by another process; connecting to it", "pid", peer.PID)
		}
	}

	if err := in.openBus(ctx, peer, log); err != nil {
		return nil, err
	}
	if !o.NoStore {
		if err := in.openStore(ctx, peer); err != nil {
			return nil, err
		}
	}
	lg, err := engine.OpenLog(ctx, in.Conn, engine.LogConfig{
		Stream:      cfg.Bus.Stream.Name,
		DeadLetter:  cfg.Bus.Stream.DeadLetter,
		DedupWindow: cfg.Bus.Stream.DedupWindow,
		MaxAge:      cfg.Bus.Stream.MaxAge,
		Replicas:    cfg.Bus.Stream.Replicas,
	})
	if err != nil {
		return nil, err
	}
	in.Log = lg
	if in.Owner {
		in.Endpoints.PID = os.Getpid()
		in.Endpoints.Started = time.Now().UTC()
		in.Endpoints.Transient = !o.Serve
		if err := writeEndpoints(dataDir, in.Endpoints); err != nil {
			return nil, err
		}
		in.closers = append(in.closers, func() { os.Remove(EndpointsPath(dataDir)) })
	}
	return in, nil
}

func (in *Infra) openBus(ctx context.Context, peer *Endpoints, log *slog.Logger) error {
	cfg := in.Config.Bus
	switch {
	case cfg.Mode == config.External:
		x := cfg.External
		pw := x.Password
		if x.PasswordEnv != "" {
			pw = os.Getenv(x.PasswordEnv)
		}
		nc, err := bus.Connect(ctx, bus.ConnectOptions{
			Name: "t1", URLs: x.URLs, User: x.User, Password: pw, NKeyFile: x.NKeyFile, CredsFile: x.CredsFile,
			TLS:    bus.TLSOptions{CAFile: x.TLS.CAFile, CertFile: x.TLS.CertFile, KeyFile: x.TLS.KeyFile, InsecureSkipVerify: x.TLS.InsecureSkipVerify},
			Logger: log,
		})
		if err != nil {
			return err
		}
		in.Conn = nc
		in.Endpoints.NATS = nc.ConnectedUrlRedacted()
	case peer != nil:
		nc, err := bus.Connect(ctx, bus.ConnectOptions{Name: "t1", URLs: []string{peer.NATS}, Logger: log})
		if err != nil {
			return fmt.Errorf("%w (is the process %d that owns %s still running?)", err, peer.PID, in.DataDir)
		}
		in.Conn = nc
		in.Endpoints.NATS = peer.NATS
	default:
		srv, err := bus.StartEmbedded(bus.EmbeddedOptions{
			StoreDir: filepath.Join(in.DataDir, "nats"),
			Host:     cfg.Embedded.Host,
			Port:     cfg.Embedded.Port,
		})
		if err != nil {
			return err
		}
		in.closers = append(in.closers, srv.Shutdown)
		nc, err := bus.Connect(ctx, bus.ConnectOptions{Name: "t1", InProcess: srv.Server(), Logger: log})
		if err != nil {
			return err
		}
		in.Conn = nc
		in.Endpoints.NATS = srv.ClientURL()
	}
	in.closers = append(in.closers, in.Conn.Close)
	return nil
}

func (in *Infra) openStore(ctx context.Context, peer *Endpoints) error {
	cfg := in.Config.Store
	var sc s3.Config
	switch {
	case cfg.Mode == config.External:
		sc = s3.Config{
			Endpoint: cfg.External.Endpoint, Bucket: cfg.Bucket, Region: cfg.External.Region,
			Secure: cfg.External.Secure, Prefix: cfg.External.Prefix,
		}
	case peer != nil:
		creds, err := readCredentials(peer.Credentials)
		if err != nil {
			return err
		}
		sc = s3.Config{Endpoint: peer.S3, Bucket: peer.Bucket, AccessKey: creds.AccessKey, SecretKey: creds.SecretKey}
		in.Endpoints.S3, in.Endpoints.Bucket, in.Endpoints.Credentials = peer.S3, peer.Bucket, peer.Credentials
	default:
		dir := filepath.Join(in.DataDir, "s3")
		gw, err := embedded.Start(ctx, embedded.Options{
			Dir: dir, Host: cfg.Embedded.Host, Port: cfg.Embedded.Port, Bucket: cfg.Bucket,
		})
		if err != nil {
			return err
		}
		in.closers = append(in.closers, func() {
			if err := gw.Close(); err != nil {
				slog.Warn("closing the object store", "err", err)
			}
		})
		sc = gw.Config()
		in.Endpoints.S3, in.Endpoints.Bucket, in.Endpoints.Credentials = gw.Endpoint(), cfg.Bucket, embedded.CredentialsPath(dir)
	}
	s, err := s3.Open(ctx, sc)
	if err != nil {
		return err
	}
	in.Store = s
	if in.Endpoints.S3 == "" {
		in.Endpoints.S3, in.Endpoints.Bucket = sc.Endpoint, sc.Bucket
	}
	return nil
}

// Close releases everything in reverse order of acquisition.
func (in *Infra) Close() {
	for i := len(in.closers) - 1; i >= 0; i-- {
		in.closers[i]()
	}
	in.closers = nil
}

// lock takes the data directory's exclusive lock. It returns nil, nil when
// another process holds it.
func lock(dataDir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dataDir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	// Who holds it, for the message of whoever finds it held.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// holder names the process that last took the data directory's lock, as
// it wrote itself there: the holder, unless a process it started holds a
// copy of its descriptor.
func holder(dataDir string) string {
	b, _ := os.ReadFile(filepath.Join(dataDir, "lock"))
	pid := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(pid); err != nil {
		return "another process"
	}
	if cmd, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline")); err == nil && len(cmd) > 0 {
		return fmt.Sprintf("a lock last taken by process %s (%s)", pid, strings.Join(strings.Fields(strings.ReplaceAll(string(cmd), "\x00", " ")), " "))
	}
	return "a lock last taken by process " + pid
}

// waitLock polls for the data directory's lock until d has passed.
func waitLock(ctx context.Context, dataDir string, d time.Duration) (*os.File, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(d)
	for {
		f, err := lock(dataDir)
		if err != nil || f != nil || time.Now().After(deadline) {
			return f, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func writeEndpoints(dataDir string, e Endpoints) error {
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	tmp := EndpointsPath(dataDir) + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("endpoints file: %w", err)
	}
	return os.Rename(tmp, EndpointsPath(dataDir))
}

// attach waits for the data directory's owner to publish its endpoints,
// or for its lock to come free: an owner that is starting publishes them
// once its servers run, and one that is closing has removed them and lets
// go of the lock once its servers have stopped (the object store's
// process among them).
func attach(dataDir string) (*os.File, *Endpoints, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(EndpointsPath(dataDir))
		if err == nil {
			var e Endpoints
			if err := json.Unmarshal(data, &e); err != nil {
				return nil, nil, fmt.Errorf("endpoints file %s: %w", EndpointsPath(dataDir), err)
			}
			return nil, &e, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("endpoints file: %w", err)
		}
		if f, err := lock(dataDir); err != nil || f != nil {
			return f, nil, err
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("data directory %s is held (%s) by a process that published no endpoints: %w", dataDir, holder(dataDir), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readCredentials(path string) (struct{ AccessKey, SecretKey string }, error) {
	var c struct {
		AccessKey string `json:"access_key"`
		SecretKey string `json:"secret_key"`
	}
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &c)
	}
	if err != nil {
		return struct{ AccessKey, SecretKey string }{}, fmt.Errorf("embedded S3 credentials: %w", err)
	}
	return struct{ AccessKey, SecretKey string }{c.AccessKey, c.SecretKey}, nil
}
