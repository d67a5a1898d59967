package trainer

import (
	"os"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

// pkgDir is the package directory, captured before the embedded S3
// gateway makes its own directory the process's working directory.
var pkgDir, _ = os.Getwd()

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }
