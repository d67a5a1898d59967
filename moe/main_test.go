package moe

import (
	"os"
	"testing"

	"github.com/t1pipe/t1/infra/store"
	"github.com/t1pipe/t1/internal/testinfra"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

func openStore(t testing.TB) store.ObjectStore { return testinfra.Store(t) }
