package inference

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// testdata resolves against the package directory: the embedded S3
// gateway moves the working directory while tests run.
func testdata(name string) string { return filepath.Join(testinfra.WorkDir(), "testdata", name) }

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }
