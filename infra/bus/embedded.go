package bus

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configures an in-process nats-server.
type EmbeddedOptions struct {
	// StoreDir holds JetStream's file storage. Restarting on the same
	// directory recovers every stream, consumer and KV bucket.
	StoreDir string
	// Host defaults to 127.0.0.1: the embedded server is for one machine.
	Host string
	// Port 0 picks a free port; the chosen one is reported by ClientURL.
	Port int
	// ReadyTimeout bounds start-up; 10s when zero.
	ReadyTimeout time.Duration
}

// Embedded is a running in-process nats-server with JetStream enabled.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts nats-server with JetStream on opts.StoreDir and waits
// until it accepts clients. The caller must Shutdown it.
func StartEmbedded(opts EmbeddedOptions) (*Embedded, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("bus: embedded server needs a store directory")
	}
	dir, err := filepath.Abs(opts.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("bus: store directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bus: store directory: %w", err)
	}
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := opts.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	// nats-server does not report a failed listen to ReadyForConnections, so
	// a taken port would otherwise cost the whole ready timeout before the
	// check below explains it.
	if opts.Port > 0 && portBusy(host, opts.Port) {
		return nil, fmt.Errorf("bus: embedded server: port %d on %s is already in use", opts.Port, host)
	}
	so := &server.Options{
		ServerName: "t1-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
		// A bounded max payload keeps oversized events a clear publish error
		// instead of a slow consumer somewhere downstream.
		MaxPayload: 8 << 20,
	}
	srv, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded server: %w", err)
	}
	go srv.Start()
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if !srv.ReadyForConnections(timeout) {
		srv.Shutdown()
		if opts.Port > 0 && portBusy(host, opts.Port) {
			return nil, fmt.Errorf("bus: embedded server: port %d on %s is already in use", opts.Port, host)
		}
		return nil, fmt.Errorf("bus: embedded server on %s not ready after %s", dir, timeout)
	}
	return &Embedded{srv: srv}, nil
}

func portBusy(host string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return true
	}
	l.Close()
	return false
}

// ClientURL is the nats:// URL other processes and the nats CLI connect to.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Server exposes the server for in-process connections (see Connect).
func (e *Embedded) Server() *server.Server { return e.srv }

// Shutdown stops the server and waits until its store is closed, so a new
// server may be started on the same directory right after.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
