package schemas

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/infra/store"
)

// shared is the one embedded S3 gateway of this test binary. It changes
// the working directory, so origWD keeps the package directory.
var (
	shared *store.Embedded
	origWD string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if origWD, err = os.Getwd(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "t1-schemas-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	shared, err = store.StartEmbedded(context.Background(), store.EmbeddedOptions{Dir: filepath.Join(tmp, "s3")})
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

func openStore(t testing.TB) store.ObjectStore {
	t.Helper()
	s, err := store.Open(context.Background(), shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
