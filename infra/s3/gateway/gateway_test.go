package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/t1pipe/t1/infra/s3"
	"github.com/t1pipe/t1/infra/s3/embedded"
	"github.com/t1pipe/t1/infra/s3/gateway"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/store/storetest"
)

// shared is the one embedded gateway of this test binary; TestRestart
// replaces it with a restarted instance on the same directory.
var (
	shared    *gateway.Gateway
	sharedDir string
	origWD    string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	origWD, err = os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "t1-store-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	sharedDir = filepath.Join(tmp, "s3")
	shared, err = gateway.Start(context.Background(), gateway.Options{Dir: sharedDir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := shared.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func openShared(t testing.TB) *s3.Store {
	t.Helper()
	s, err := s3.Open(t.Context(), shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformanceEmbedded(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.ObjectStore { return openShared(t) })
}

func TestPrefix(t *testing.T) {
	cfg := shared.Config()
	cfg.Prefix = "/tenant-a/"
	s, err := s3.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"x/1", "x/2", "y"} {
		if _, err := s.Put(t.Context(), k, strings.NewReader(k), int64(len(k)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for info, err := range s.List(t.Context(), "x/") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	if want := []string{"x/1", "x/2"}; !slices.Equal(keys, want) {
		t.Errorf("List(x/) = %q, want %q", keys, want)
	}
	if info, err := s.Stat(t.Context(), "y"); err != nil || info.Key != "y" {
		t.Errorf("Stat(y) = %+v, %v; want key without the prefix", info, err)
	}
	path := filepath.Join(shared.Dir(), cfg.Bucket, "tenant-a", "x", "1")
	if b, err := os.ReadFile(path); err != nil || string(b) != "x/1" {
		t.Errorf("object file %s = %q, %v", path, b, err)
	}
	// The unprefixed view sees the same objects under the prefix.
	if _, err := openShared(t).Stat(t.Context(), "tenant-a/y"); err != nil {
		t.Errorf("unprefixed Stat: %v", err)
	}
	for _, k := range []string{"x/1", "x/2", "y"} {
		if err := s.Delete(t.Context(), k); err != nil {
			t.Error(err)
		}
	}
}

// TestConformanceExternal runs the suite against a real S3 endpoint named by
// T1_TEST_S3_ENDPOINT and T1_TEST_S3_BUCKET, with the usual AWS_* variables
// for credentials and region; T1_TEST_S3_SECURE=1 selects HTTPS for a
// host:port endpoint.
func TestConformanceExternal(t *testing.T) {
	endpoint, bucket := os.Getenv("T1_TEST_S3_ENDPOINT"), os.Getenv("T1_TEST_S3_BUCKET")
	if endpoint == "" || bucket == "" {
		t.Skip("T1_TEST_S3_ENDPOINT and T1_TEST_S3_BUCKET not set")
	}
	cfg := s3.Config{Endpoint: endpoint, Bucket: bucket, Secure: os.Getenv("T1_TEST_S3_SECURE") == "1"}
	storetest.Run(t, func(t *testing.T) store.ObjectStore {
		s, err := s3.Open(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestObjectsArePlainFiles(t *testing.T) {
	s := openShared(t)
	key := "plain/files/part-0000.parquet"
	body := []byte("PAR1 not really PAR1")
	if _, err := s.Put(t.Context(), key, bytes.NewReader(body), int64(len(body)), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Delete(context.Background(), key) })
	path := filepath.Join(shared.Dir(), shared.Config().Bucket, key)
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("reading %s directly = %q, %v; want the object's bytes", path, got, err)
	}
}

func TestWorkingDirectoryPinnedWhileRunning(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if wd != shared.Dir() {
		t.Errorf("working directory while the gateway runs = %s, want %s", wd, shared.Dir())
	}
}

func TestSecondEmbeddedFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "other")
	_, err := gateway.Start(t.Context(), gateway.Options{Dir: dir})
	if !errors.Is(err, gateway.ErrRunning) {
		t.Fatalf("second StartEmbedded = %v, want ErrEmbeddedRunning", err)
	}
	if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
		t.Errorf("refused start touched %s (stat: %v)", dir, statErr)
	}
	if wd, _ := os.Getwd(); wd != shared.Dir() {
		t.Errorf("refused start moved the working directory to %s", wd)
	}
	// The running gateway is unaffected.
	if _, err := openShared(t).Stat(t.Context(), "nothing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("running gateway after refused start: %v", err)
	}
}

func TestCredentialsFile(t *testing.T) {
	path := embedded.CredentialsPath(sharedDir)
	if filepath.Dir(path) != filepath.Dir(sharedDir) {
		t.Errorf("credentials file %s is not next to %s", path, sharedDir)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("credentials file mode = %v, want 0600", fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := shared.Config()
	if !strings.Contains(string(b), cfg.AccessKey) || !strings.Contains(string(b), cfg.SecretKey) {
		t.Error("credentials file does not hold the gateway's credentials")
	}
	if strings.Contains(cfg.String(), cfg.SecretKey) || strings.Contains(fmt.Sprint(cfg), cfg.SecretKey) {
		t.Error("Config's string form contains the secret key")
	}
}

// TestRestart stops the shared gateway and starts it again on the same
// directory: credentials and objects survive, and the working directory
// is restored in between.
func TestRestart(t *testing.T) {
	before := shared.Config()
	s := openShared(t)
	if _, err := s.Put(t.Context(), "restart/obj", strings.NewReader("persist"), 7, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := shared.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := shared.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if wd, _ := os.Getwd(); wd != origWD {
		t.Errorf("working directory after Close = %s, want %s", wd, origWD)
	}

	var err error
	shared, err = gateway.Start(t.Context(), gateway.Options{Dir: sharedDir})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	after := shared.Config()
	if after.AccessKey != before.AccessKey || after.SecretKey != before.SecretKey {
		t.Error("restart generated new credentials instead of reusing the stored ones")
	}
	s = openShared(t)
	rc, _, err := s.Get(t.Context(), "restart/obj")
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "persist" {
		t.Errorf("object after restart = %q, want %q", got, "persist")
	}
	if err := s.Delete(t.Context(), "restart/obj"); err != nil {
		t.Error(err)
	}
}

func TestFixedPort(t *testing.T) {
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	var err error
	shared, err = gateway.Start(t.Context(), gateway.Options{Dir: sharedDir, Port: port, Bucket: "t1-data"})
	if err != nil {
		t.Fatalf("start on port %d: %v", port, err)
	}
	if want := fmt.Sprintf("127.0.0.1:%d", port); shared.Endpoint() != want {
		t.Errorf("Endpoint = %s, want %s", shared.Endpoint(), want)
	}
	openShared(t)

	// A taken port: a clear error, and nothing left behind.
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	_, err = gateway.Start(t.Context(), gateway.Options{Dir: sharedDir, Port: taken})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("start on a taken port = %v, want an address-in-use error", err)
	} else {
		t.Log(err)
	}
	if wd, _ := os.Getwd(); wd != origWD {
		t.Errorf("working directory after failed start = %s, want %s", wd, origWD)
	}
	shared, err = gateway.Start(t.Context(), gateway.Options{Dir: sharedDir})
	if err != nil {
		t.Fatalf("start after a failed start: %v", err)
	}
}

// TestSidecarMetadata runs the suite on a gateway that keeps metadata in a
// sidecar directory, as it does on file systems without extended
// attributes, then brings the shared gateway back.
func TestSidecarMetadata(t *testing.T) {
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		if shared, err = gateway.Start(context.Background(), gateway.Options{Dir: sharedDir}); err != nil {
			t.Fatalf("restart shared gateway: %v", err)
		}
	})
	gateway.SetForceSidecar(true)
	dir := filepath.Join(t.TempDir(), "s3")
	e, err := gateway.Start(t.Context(), gateway.Options{Dir: dir})
	gateway.SetForceSidecar(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	storetest.Run(t, func(t *testing.T) store.ObjectStore {
		s, err := s3.Open(t.Context(), e.Config())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})

	s, err := s3.Open(t.Context(), e.Config())
	if err != nil {
		t.Fatal(err)
	}
	opts := store.PutOptions{ContentType: "text/plain", Metadata: map[string]string{"k": "v"}}
	if _, err := s.Put(t.Context(), "m/obj", strings.NewReader("body"), 4, opts); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, e.Config().Bucket, "m/obj")); err != nil || string(b) != "body" {
		t.Errorf("object file = %q, %v; want the object's bytes", b, err)
	}
	side := filepath.Join(filepath.Dir(dir), ".s3-meta")
	if entries, err := os.ReadDir(side); err != nil || len(entries) == 0 {
		t.Errorf("sidecar directory %s is empty or missing (%v)", side, err)
	}
}

func TestOpenURLEndpointAndEnvCredentials(t *testing.T) {
	cfg := shared.Config()
	t.Setenv("AWS_ACCESS_KEY_ID", cfg.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", cfg.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", cfg.Region)
	s, err := s3.Open(t.Context(), s3.Config{Endpoint: "http://" + cfg.Endpoint, Bucket: cfg.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(t.Context(), "nothing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Stat via env credentials = %v, want ErrNotFound", err)
	}
}

func TestOpenCreatesBucket(t *testing.T) {
	cfg := shared.Config()
	cfg.Bucket = "t1-created-on-open"
	s, err := s3.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(t.Context(), "k", strings.NewReader("v"), 1, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(shared.Dir(), cfg.Bucket, "k")); err != nil || fi.Size() != 1 {
		t.Errorf("object not in the new bucket's directory: %v", err)
	}
	// Opening again finds the bucket in place.
	if _, err := s3.Open(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	const secret = "sEcReT-should-never-show"
	port := freePort(t)
	endpoint := fmt.Sprintf("127.0.0.1:%d", port)
	good := shared.Config()
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")

	cases := []struct {
		name    string
		cfg     s3.Config
		want    string // exact error, or a substring when prefixed with "~"
		wantIs  error
		oneLine bool
	}{
		{
			name:    "unreachable",
			cfg:     s3.Config{Endpoint: endpoint, Bucket: "t1-data", AccessKey: "AKIA", SecretKey: secret},
			want:    fmt.Sprintf(`store: cannot reach S3 endpoint %s (bucket "t1-data"): connection refused`, endpoint),
			wantIs:  syscall.ECONNREFUSED,
			oneLine: true,
		},
		{
			name:    "unreachable URL",
			cfg:     s3.Config{Endpoint: "http://" + endpoint, Bucket: "t1-data", AccessKey: "AKIA", SecretKey: secret},
			want:    fmt.Sprintf(`store: cannot reach S3 endpoint %s (bucket "t1-data"): connection refused`, endpoint),
			wantIs:  syscall.ECONNREFUSED,
			oneLine: true,
		},
		{
			name:    "wrong secret",
			cfg:     s3.Config{Endpoint: good.Endpoint, Bucket: good.Bucket, Region: good.Region, AccessKey: good.AccessKey, SecretKey: secret},
			want:    fmt.Sprintf("~store: S3 endpoint %s denied access to bucket %q", good.Endpoint, good.Bucket),
			oneLine: true,
		},
		{
			name: "no credentials",
			cfg:  s3.Config{Endpoint: endpoint, Bucket: "t1-data"},
			want: "~no S3 credentials",
		},
		{
			name: "half credentials",
			cfg:  s3.Config{Endpoint: endpoint, Bucket: "t1-data", SecretKey: secret},
			want: "~incomplete S3 credentials",
		},
		{
			name: "short bucket name",
			cfg:  s3.Config{Endpoint: endpoint, Bucket: "t1", AccessKey: "a", SecretKey: secret},
			want: "~Bucket name cannot be shorter than 3 characters",
		},
		{
			name: "no bucket",
			cfg:  s3.Config{Endpoint: endpoint, AccessKey: "a", SecretKey: secret},
			want: "~no bucket",
		},
		{
			name: "bad scheme",
			cfg:  s3.Config{Endpoint: "ftp://" + endpoint, Bucket: "t1-data", AccessKey: "a", SecretKey: secret},
			want: "~scheme must be http or https",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s3.Open(t.Context(), c.cfg)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			t.Log(msg)
			if sub, ok := strings.CutPrefix(c.want, "~"); ok {
				if !strings.Contains(msg, sub) {
					t.Errorf("error = %q, want it to contain %q", msg, sub)
				}
			} else if msg != c.want {
				t.Errorf("error = %q\nwant     %q", msg, c.want)
			}
			if c.wantIs != nil && !errors.Is(err, c.wantIs) {
				t.Errorf("error %v does not wrap %v", err, c.wantIs)
			}
			if c.oneLine && strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
			if strings.Contains(msg, secret) {
				t.Errorf("error contains the secret key: %q", msg)
			}
		})
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func BenchmarkPutGet(b *testing.B) {
	s := openShared(b)
	for _, size := range []int{1 << 20, 64 << 20} {
		body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		name := fmt.Sprintf("%dMiB", size>>20)
		key := "bench/" + name
		if _, err := s.Put(b.Context(), key, bytes.NewReader(body), int64(size), store.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		b.Run("put/"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := s.Put(b.Context(), key, bytes.NewReader(body), int64(size), store.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("get/"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				rc, _, err := s.Get(b.Context(), key)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					b.Fatal(err)
				}
				rc.Close()
			}
		})
		_ = s.Delete(context.Background(), key)
	}
}
