package worker

import (
	"os"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Run(m)) }
