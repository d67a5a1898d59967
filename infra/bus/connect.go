package bus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TLSOptions configures TLS towards an external cluster.
type TLSOptions struct {
	CAFile             string
	CertFile           string
	KeyFile            string
	InsecureSkipVerify bool
}

func (t TLSOptions) enabled() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify
}

// ConnectOptions says how to reach NATS. Exactly one of InProcess or URLs is
// used; InProcess wins when set.
type ConnectOptions struct {
	// Name identifies the connection in server monitoring.
	Name string
	// InProcess connects to an embedded server without TCP.
	InProcess *server.Server
	URLs      []string
	User      string
	Password  string
	NKeyFile  string
	CredsFile string
	TLS       TLSOptions
	// Timeout bounds the initial connect; 5s when zero.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Connect dials NATS. After the first successful connect the client
// reconnects forever, so stages ride out a server restart; the initial
// connect fails fast with one readable error.
func Connect(ctx context.Context, o ConnectOptions) (*nats.Conn, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	opts := []nats.Option{
		nats.Name(nonEmpty(o.Name, "t1")),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectBufSize(64 << 20),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
	}
	target := strings.Join(o.URLs, ",")
	if o.InProcess != nil {
		opts = append(opts, nats.InProcessServer(o.InProcess))
		target = "embedded server"
	} else if len(o.URLs) == 0 {
		return nil, errors.New("bus: no NATS URL configured")
	}
	if o.User != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.NKeyFile != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("bus: nkey seed %s: %w", o.NKeyFile, err)
		}
		opts = append(opts, opt)
	}
	if o.CredsFile != "" {
		if _, err := os.Stat(o.CredsFile); err != nil {
			return nil, fmt.Errorf("bus: creds file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.TLS.enabled() {
		if o.TLS.CAFile != "" {
			opts = append(opts, nats.RootCAs(o.TLS.CAFile))
		}
		if o.TLS.CertFile != "" || o.TLS.KeyFile != "" {
			opts = append(opts, nats.ClientCert(o.TLS.CertFile, o.TLS.KeyFile))
		}
		opts = append(opts, nats.Secure(&tls.Config{
			MinVersion:         tls.VersionTLS12,
			InsecureSkipVerify: o.TLS.InsecureSkipVerify, //nolint:gosec // explicit opt-in for test clusters
		}))
	}
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(strings.Join(o.URLs, ","), opts...)
		done <- result{nc, err}
	}()
	select {
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, fmt.Errorf("bus: connect to %s: %w", redact(target), ctx.Err())
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("bus: cannot connect to NATS at %s: %s", redact(target), dialCause(o.URLs, r.err))
		}
		return r.nc, nil
	}
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// redact drops user:password@ from URLs so errors never carry secrets.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, u := range parts {
		if at := strings.LastIndex(u, "@"); at >= 0 {
			scheme := ""
			if s := strings.Index(u, "://"); s >= 0 {
				scheme = u[:s+3]
			}
			parts[i] = scheme + "***@" + u[at+1:]
		}
	}
	return strings.Join(parts, ",")
}

// dialCause explains a failed connect. nats.go reports every unreachable
// server as "no servers available"; dialing the first one ourselves
// recovers the reason (refused, unresolvable, timed out).
func dialCause(urls []string, err error) string {
	if !errors.Is(err, nats.ErrNoServers) || len(urls) == 0 {
		return rootCause(err)
	}
	u, perr := url.Parse(strings.TrimSpace(strings.Split(urls[0], ",")[0]))
	if perr != nil || u.Host == "" {
		return rootCause(err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "4222")
	}
	c, derr := net.DialTimeout("tcp", host, 2*time.Second)
	if derr != nil {
		return rootCause(derr)
	}
	c.Close()
	return rootCause(err)
}

// rootCause reduces a wrapped dial error to its innermost message, e.g.
// "connection refused", so the user sees one line. It stops at a path error:
// below it is a bare errno that no longer says which file (CA, client
// certificate) was missing.
func rootCause(err error) string {
	for {
		if _, ok := err.(*fs.PathError); ok { //nolint:errorlint // this layer, not the chain
			break
		}
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "dial tcp") {
		msg = msg[i+2:]
	}
	return msg
}
