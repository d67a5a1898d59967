package bus

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

const connectPrefix = "bus: cannot connect to NATS at "

func TestConnectUserPassword(t *testing.T) {
	const user, pass = "alice", "s3cret-pw"
	s := startServer(t, &server.Options{Username: user, Password: pass})
	url := serverURL(s, "nats")

	t.Run("right password", func(t *testing.T) {
		nc := mustConnect(t, ConnectOptions{URLs: []string{url}, User: user, Password: pass})
		roundTrip(t, nc)
	})

	t.Run("wrong password", func(t *testing.T) {
		const wrong = "not-the-pw"
		_, err := connect(t, ConnectOptions{URLs: []string{url}, User: user, Password: wrong})
		assertConnectError(t, err, connectPrefix+url+": ", "authorization", wrong, pass)
	})

	t.Run("no credentials", func(t *testing.T) {
		_, err := connect(t, ConnectOptions{URLs: []string{url}})
		assertConnectError(t, err, connectPrefix+url+": ", "authorization")
	})

	t.Run("credentials in URL", func(t *testing.T) {
		withCreds := strings.Replace(url, "nats://", "nats://"+user+":"+pass+"@", 1)
		nc := mustConnect(t, ConnectOptions{URLs: []string{withCreds}})
		roundTrip(t, nc)
	})

	t.Run("wrong credentials in URL are redacted", func(t *testing.T) {
		const wrong = "url-pw-wrong"
		withCreds := strings.Replace(url, "nats://", "nats://"+user+":"+wrong+"@", 1)
		_, err := connect(t, ConnectOptions{URLs: []string{withCreds}})
		redacted := strings.Replace(url, "nats://", "nats://***@", 1)
		assertConnectError(t, err, connectPrefix+redacted+": ", "authorization", wrong, user+":")
	})
}

func TestConnectNKey(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := user.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := user.Seed()
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	url := serverURL(s, "nats")

	t.Run("known key", func(t *testing.T) {
		nc := mustConnect(t, ConnectOptions{URLs: []string{url}, NKeyFile: writeSecret(t, "user.nk", seed)})
		roundTrip(t, nc)
	})

	t.Run("unknown key", func(t *testing.T) {
		other, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		otherSeed, err := other.Seed()
		if err != nil {
			t.Fatal(err)
		}
		_, err = connect(t, ConnectOptions{URLs: []string{url}, NKeyFile: writeSecret(t, "other.nk", otherSeed)})
		assertConnectError(t, err, connectPrefix+url+": ", "authorization", string(otherSeed))
	})

	t.Run("missing seed file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "absent.nk")
		_, err := connect(t, ConnectOptions{URLs: []string{url}, NKeyFile: missing})
		assertConnectError(t, err, "bus: nkey seed "+missing+": ", "no such file")
	})

	t.Run("account seed is not a user seed", func(t *testing.T) {
		acc, err := nkeys.CreateAccount()
		if err != nil {
			t.Fatal(err)
		}
		accSeed, err := acc.Seed()
		if err != nil {
			t.Fatal(err)
		}
		path := writeSecret(t, "account.nk", accSeed)
		_, err = connect(t, ConnectOptions{URLs: []string{url}, NKeyFile: path})
		assertConnectError(t, err, "bus: nkey seed "+path+": ", "user seed", string(accSeed))
	})
}

// operatorSetup is the smallest decentralized-auth deployment: one operator
// trusting one account, whose JWT the server resolves from memory.
type operatorSetup struct {
	operator   nkeys.KeyPair
	account    nkeys.KeyPair
	opts       *server.Options
	accountPub string
}

func newOperatorSetup(t *testing.T) operatorSetup {
	t.Helper()
	op, err := nkeys.CreateOperator()
	if err != nil {
		t.Fatal(err)
	}
	opPub, err := op.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	opClaims := jwt.NewOperatorClaims(opPub)
	// The server only trusts operator claims that are self-signed.
	opJWT, err := opClaims.Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	opClaims, err = jwt.DecodeOperatorClaims(opJWT)
	if err != nil {
		t.Fatal(err)
	}

	acc, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	accPub, err := acc.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	accJWT, err := jwt.NewAccountClaims(accPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	if err := resolver.Store(accPub, accJWT); err != nil {
		t.Fatal(err)
	}
	return operatorSetup{
		operator:   op,
		account:    acc,
		accountPub: accPub,
		opts: &server.Options{
			TrustedOperators: []*jwt.OperatorClaims{opClaims},
			AccountResolver:  resolver,
		},
	}
}

// userCreds issues a user under signer and formats it as a .creds file, the
// artefact `nsc generate creds` hands to operators.
func userCreds(t *testing.T, signer nkeys.KeyPair) (creds []byte, seed []byte) {
	t.Helper()
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := user.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	seed, err = user.Seed()
	if err != nil {
		t.Fatal(err)
	}
	userJWT, err := jwt.NewUserClaims(pub).Encode(signer)
	if err != nil {
		t.Fatal(err)
	}
	creds, err = jwt.FormatUserConfig(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	return creds, seed
}

func TestConnectCredsFile(t *testing.T) {
	setup := newOperatorSetup(t)
	s := startServer(t, setup.opts)
	url := serverURL(s, "nats")

	t.Run("user of trusted account", func(t *testing.T) {
		creds, _ := userCreds(t, setup.account)
		nc := mustConnect(t, ConnectOptions{URLs: []string{url}, CredsFile: writeSecret(t, "user.creds", creds)})
		roundTrip(t, nc)
	})

	t.Run("user of unknown account", func(t *testing.T) {
		rogue, err := nkeys.CreateAccount()
		if err != nil {
			t.Fatal(err)
		}
		creds, seed := userCreds(t, rogue)
		_, err = connect(t, ConnectOptions{URLs: []string{url}, CredsFile: writeSecret(t, "rogue.creds", creds)})
		assertConnectError(t, err, connectPrefix+url+": ", "authorization", string(seed))
	})

	t.Run("missing creds file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "absent.creds")
		_, err := connect(t, ConnectOptions{URLs: []string{url}, CredsFile: missing})
		assertConnectError(t, err, "bus: creds file: ", missing)
	})
}

func TestConnectUnreachable(t *testing.T) {
	_, err := connect(t, ConnectOptions{URLs: []string{"nats://127.0.0.1:1"}})
	if err == nil {
		t.Fatal("connect to a closed port succeeded")
	}
	const want = "bus: cannot connect to NATS at nats://127.0.0.1:1: connection refused"
	if err.Error() != want {
		t.Fatalf("error = %q\nwant    %q", err, want)
	}
}

func TestConnectNoURL(t *testing.T) {
	_, err := connect(t, ConnectOptions{})
	if err == nil || err.Error() != "bus: no NATS URL configured" {
		t.Fatalf("error = %v, want %q", err, "bus: no NATS URL configured")
	}
}

// A server that accepts TCP but never speaks NATS keeps the client in its
// handshake; only the context can end the wait, and that error must be as
// careful with secrets as the dial error.
func TestConnectContextCanceledRedactsURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for {
			select {
			case c := <-held:
				c.Close()
			default:
				return
			}
		}
	})

	const pass = "ctx-secret"
	url := "nats://bob:" + pass + "@" + l.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Connect(ctx, ConnectOptions{URLs: []string{url}, Timeout: 2 * time.Second})
	if err == nil {
		t.Fatal("connect to a silent server succeeded")
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("connect returned after %s, want soon after the context ended", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q does not wrap context.DeadlineExceeded", err)
	}
	want := "bus: connect to nats://***@" + l.Addr().String() + ": context deadline exceeded"
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
	if strings.Contains(err.Error(), pass) {
		t.Errorf("error %q leaks the password", err)
	}
}

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"nats://127.0.0.1:4222":                      "nats://127.0.0.1:4222",
		"nats://u:p@h:4222":                          "nats://***@h:4222",
		"tls://u:p@ss@h:4222":                        "tls://***@h:4222",
		"token@h:4222":                               "***@h:4222",
		"nats://a:1@h1:4222,nats://h2:4222,b:2@h3:1": "nats://***@h1:4222,nats://h2:4222,***@h3:1",
	}
	for in, want := range cases {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}
