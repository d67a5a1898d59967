package bus

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// testPKI is a throwaway CA with one server and one client certificate,
// written as PEM files the way an operator would deploy them.
type testPKI struct {
	CAFile, ServerCert, ServerKey, ClientCert, ClientKey string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()

	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "t1 test CA"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}

	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Minute),
			NotAfter:     now.Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	srvDER, srvKey := issue(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	cliDER, cliKey := issue(3, "t1 client", x509.ExtKeyUsageClientAuth, nil)

	p := testPKI{
		CAFile:     filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
	}
	writePEM(t, p.CAFile, "CERTIFICATE", caDER)
	writePEM(t, p.ServerCert, "CERTIFICATE", srvDER)
	writePEM(t, p.ServerKey, "EC PRIVATE KEY", marshalKey(t, srvKey))
	writePEM(t, p.ClientCert, "CERTIFICATE", cliDER)
	writePEM(t, p.ClientKey, "EC PRIVATE KEY", marshalKey(t, cliKey))
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func marshalKey(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startTLSServer runs a server that requires TLS; with verify it also
// requires a client certificate signed by the test CA.
func startTLSServer(t *testing.T, p testPKI, verify bool) *server.Server {
	t.Helper()
	tc := &server.TLSConfigOpts{CertFile: p.ServerCert, KeyFile: p.ServerKey}
	if verify {
		tc.CaFile = p.CAFile
		tc.Verify = true
	}
	cfg, err := server.GenTLSConfig(tc)
	if err != nil {
		t.Fatalf("server tls config: %v", err)
	}
	return startServer(t, &server.Options{
		TLS:        true,
		TLSVerify:  verify,
		TLSConfig:  cfg,
		TLSTimeout: 2,
	})
}

func TestConnectTLS(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, p, false)
	natsURL := serverURL(s, "nats")
	tlsURL := serverURL(s, "tls")

	t.Run("trusted CA", func(t *testing.T) {
		for _, url := range []string{natsURL, tlsURL} {
			nc := mustConnect(t, ConnectOptions{URLs: []string{url}, TLS: TLSOptions{CAFile: p.CAFile}})
			if _, err := nc.TLSConnectionState(); err != nil {
				t.Fatalf("%s: connection is not TLS: %v", url, err)
			}
			roundTrip(t, nc)
		}
	})

	// The server asks for TLS, so the client upgrades on its own, but only
	// the system roots are trusted and the test CA is not among them.
	t.Run("CA not given", func(t *testing.T) {
		_, err := connect(t, ConnectOptions{URLs: []string{natsURL}})
		assertConnectError(t, err, connectPrefix+natsURL+": ", "certificate")
	})

	t.Run("insecure skip verify", func(t *testing.T) {
		nc := mustConnect(t, ConnectOptions{URLs: []string{tlsURL}, TLS: TLSOptions{InsecureSkipVerify: true}})
		roundTrip(t, nc)
	})

	t.Run("missing CA file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "absent-ca.pem")
		_, err := connect(t, ConnectOptions{URLs: []string{tlsURL}, TLS: TLSOptions{CAFile: missing}})
		assertConnectError(t, err, connectPrefix+tlsURL+": ", missing)
	})
}

func TestConnectMutualTLS(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, p, true)
	url := serverURL(s, "tls")

	t.Run("client certificate", func(t *testing.T) {
		nc := mustConnect(t, ConnectOptions{URLs: []string{url}, TLS: TLSOptions{
			CAFile: p.CAFile, CertFile: p.ClientCert, KeyFile: p.ClientKey,
		}})
		roundTrip(t, nc)
	})

	t.Run("missing client key", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "absent-key.pem")
		_, err := connect(t, ConnectOptions{URLs: []string{url}, TLS: TLSOptions{
			CAFile: p.CAFile, CertFile: p.ClientCert, KeyFile: missing,
		}})
		assertConnectError(t, err, connectPrefix+url+": ", missing)
	})

	t.Run("no client certificate", func(t *testing.T) {
		// Under TLS 1.3 the client finishes its handshake before the server
		// rejects it, so the client sees either the server's alert
		// ("certificate required") or only the closed socket; both are TLS
		// errors.
		_, err := connect(t, ConnectOptions{URLs: []string{url}, TLS: TLSOptions{CAFile: p.CAFile}})
		assertConnectError(t, err, connectPrefix+url+": ", "tls")
	})
}
