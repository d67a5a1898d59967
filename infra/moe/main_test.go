package moe

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/infra/store"
)

// s3 is this test binary's one embedded S3 gateway.
var s3 *store.Embedded

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "t1-moe-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	s3, err = store.StartEmbedded(context.Background(), store.EmbeddedOptions{Dir: filepath.Join(tmp, "s3")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := s3.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func openStore(t testing.TB) store.ObjectStore {
	t.Helper()
	s, err := store.Open(context.Background(), s3.Config())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
