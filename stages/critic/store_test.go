package critic_test

import (
	"context"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/store/errorstore"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/unstored"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/critic"
)

// The store failing while the batch manifest is read — its check, its
// opening, its body — is retried, not a bad batch.
func TestManifestStoreFaults(t *testing.T) {
	st := testinfra.FreshStore(t)
	ref, err := schemas.WriteManifest(context.Background(), st, unstored.Manifest("cf", 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := engine.NewRootEvent("cf", schemas.BatchReady, "0", schemas.BatchReadyPayload{Iteration: 0, PolicyVersion: 0, Manifest: ref})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []errorstore.Fault{{Op: errorstore.Stat}, {Op: errorstore.Get}, {Op: errorstore.Get, After: true}} {
		testinfra.FailsRetryably(t, critic.New(critic.Config{Store: errorstore.New(st, f)}), ev)
	}
}
