package ppo_test

import (
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/unstored"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/ppo"
	"github.com/t1pipe/t1/store"
)

// The store failing while the batch manifest is read — its check, its
// opening, its body — is retried, not a bad batch.
func TestManifestStoreFaults(t *testing.T) {
	unstored.ManifestReadFaults(t, "pf", func(ref schemas.ObjectRef) engine.Event {
		return testinfra.RootEvent(t, "pf", schemas.CriticUpdated, "0", schemas.CriticUpdatedPayload{Manifest: ref})
	}, func(st store.ObjectStore) engine.Stage { return ppo.New(ppo.Config{Store: st}) })
}
