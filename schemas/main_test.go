package schemas

import (
	"os"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/store"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

func openStore(t testing.TB) store.ObjectStore { return testinfra.Store(t) }
