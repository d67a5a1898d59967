package security_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/bus"
	"github.com/t1pipe/t1/internal/testinfra"
)

// startNATS runs an in-process nats-server with JetStream and the given
// authentication and TLS options on a random loopback port.
func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "127.0.0.1", server.RANDOM_PORT, true, true
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func natsURL(s *server.Server, scheme string) string {
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, s.Addr().(*net.TCPAddr).Port)
}

// stageRoundTrip runs one stage on an event log over opts' connection and
// waits for its output to one input.
func stageRoundTrip(t *testing.T, opts bus.ConnectOptions) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := bus.Connect(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := engine.OpenLog(ctx, nc, engine.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	echo := engine.NewStage("echo", []string{"probe.in"}, func(_ context.Context, ev engine.Event, out engine.Emitter) error {
		_, err := out.Emit("probe.out", map[string]string{"from": ev.ID})
		return err
	})
	testinfra.RunStage(t, l, echo, testinfra.Runner(1))
	ev, err := engine.NewRootEvent("sec", "probe.in", "a", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	testinfra.CheckFor(t, 20*time.Second, func() error {
		if n := testinfra.Count(t, l, "t1.sec.probe.out"); n != 1 {
			return fmt.Errorf("%d outputs", n)
		}
		return nil
	})
}

// checkRefused asserts a one-line connect error that says why and carries
// none of the secrets.
func checkRefused(t *testing.T, opts bus.ConnectOptions, why string, secrets ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	opts.Timeout = 3 * time.Second
	nc, err := bus.Connect(ctx, opts)
	if err == nil {
		nc.Close()
		t.Fatal("connected with wrong credentials")
	}
	msg := err.Error()
	t.Logf("refused: %s", msg)
	if strings.Contains(msg, "\n") || !strings.Contains(strings.ToLower(msg), why) {
		t.Fatalf("error %q: want one line mentioning %q", msg, why)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			t.Fatalf("error %q carries a secret", msg)
		}
	}
}

// A stage consumes and publishes over JetStream through bus.Connect with
// each way of authenticating to an external NATS: user and password, an
// nkey, TLS with a private CA, and mutual TLS. Wrong credentials are
// refused with one line that names the problem and not the secret.
func TestStageOverAuthenticatedBus(t *testing.T) {
	t.Run("user and password", func(t *testing.T) {
		const user, pass = "t1", "bus-pw-7Hq2xV9c"
		s := startNATS(t, &server.Options{Username: user, Password: pass})
		url := natsURL(s, "nats")
		stageRoundTrip(t, bus.ConnectOptions{URLs: []string{url}, User: user, Password: pass})
		checkRefused(t, bus.ConnectOptions{URLs: []string{url}, User: user, Password: "wrong-pw-3kLz"}, "authorization", "wrong-pw-3kLz", pass)
		checkRefused(t, bus.ConnectOptions{URLs: []string{strings.Replace(url, "nats://", "nats://t1:url-pw-9Qx@", 1)}}, "authorization", "url-pw-9Qx", pass)
	})
	t.Run("nkey", func(t *testing.T) {
		kp, seedFile := newNKey(t)
		pub, err := kp.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		s := startNATS(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
		url := natsURL(s, "nats")
		stageRoundTrip(t, bus.ConnectOptions{URLs: []string{url}, NKeyFile: seedFile})
		other, otherFile := newNKey(t)
		otherSeed, _ := other.Seed()
		checkRefused(t, bus.ConnectOptions{URLs: []string{url}, NKeyFile: otherFile}, "authorization", string(otherSeed))
	})
	t.Run("tls", func(t *testing.T) {
		pki := newPKI(t)
		s := startNATS(t, &server.Options{TLS: true, TLSConfig: pki.serverConfig(t, false), TLSTimeout: 5})
		url := natsURL(s, "tls")
		stageRoundTrip(t, bus.ConnectOptions{URLs: []string{url}, TLS: bus.TLSOptions{CAFile: pki.caFile}})
		// Without the private CA the server's certificate is not trusted.
		checkRefused(t, bus.ConnectOptions{URLs: []string{url}, TLS: bus.TLSOptions{CertFile: pki.clientCert, KeyFile: pki.clientKey}}, "certificate")
	})
	t.Run("mutual tls", func(t *testing.T) {
		pki := newPKI(t)
		s := startNATS(t, &server.Options{TLS: true, TLSVerify: true, TLSConfig: pki.serverConfig(t, true), TLSTimeout: 5})
		url := natsURL(s, "tls")
		stageRoundTrip(t, bus.ConnectOptions{URLs: []string{url}, TLS: bus.TLSOptions{CAFile: pki.caFile, CertFile: pki.clientCert, KeyFile: pki.clientKey}})
		// Under TLS 1.3 the rejection of a missing client certificate comes
		// after the client's handshake: an alert or just a closed socket.
		checkRefused(t, bus.ConnectOptions{URLs: []string{url}, TLS: bus.TLSOptions{CAFile: pki.caFile}}, "tls")
	})
}

func newNKey(t *testing.T) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return kp, path
}

// pki is a throwaway CA with a server certificate for 127.0.0.1 and a
// client certificate, as PEM files.
type pki struct {
	caFile, serverCert, serverKey, clientCert, clientKey string
	ca                                                   *x509.CertPool
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	caKey := ecKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "t1 throwaway CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := pki{caFile: filepath.Join(dir, "ca.pem"), ca: x509.NewCertPool()}
	p.ca.AddCert(ca)
	writePEM(t, p.caFile, "CERTIFICATE", caDER)
	issue := func(serial int64, name string, usage x509.ExtKeyUsage, ips []net.IP) (string, string) {
		key := ecKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		cert, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, cert, "CERTIFICATE", der)
		writePEM(t, keyFile, "EC PRIVATE KEY", kder)
		return cert, keyFile
	}
	p.serverCert, p.serverKey = issue(2, "server", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	p.clientCert, p.clientKey = issue(3, "client", x509.ExtKeyUsageClientAuth, nil)
	return p
}

func (p pki) serverConfig(t *testing.T, verifyClients bool) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if verifyClients {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, p.ca
	}
	return c
}

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
