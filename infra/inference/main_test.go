package inference

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/infra/store"
)

// s3 is this test binary's one embedded S3 gateway. It changes the
// working directory, so testdata paths are resolved against origWD.
var (
	s3     *store.Embedded
	origWD string
)

func testdata(name string) string { return filepath.Join(origWD, "testdata", name) }

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if origWD, err = os.Getwd(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "t1-inference-test-")
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
