// Package unstored makes well-formed references to table objects that are
// not stored, for tests of stages that fail, or decide, before they read
// them. (It is apart from testinfra, which the schemas tests import.)
package unstored

import (
	"context"
	"strings"
	"testing"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/store/errorstore"

	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
)

// Ref is a well-formed reference to a one-row object of table that
// is not stored, for manifests and events that are written, not read.
func Ref(run string, table schemas.Table, name string) schemas.FileRef {
	return schemas.FileRef{Key: keys.TablePrefix(run, table.Name) + name + ".parquet", Table: table.Name,
		SchemaVersion: table.Version.String(), Rows: 1, Bytes: 1, SHA256: strings.Repeat("ab", 32)}
}

// Manifest is a valid batch manifest of one attempt of one chunk,
// values included, whose files are not stored: enough for a stage that
// fails before it reads them.
func Manifest(run string, iteration int, version int64) *schemas.BatchManifest {
	d := schemas.ModelDims{Vocab: 512, Layers: 2, TopK: 2, Experts: 8}
	m := &schemas.BatchManifest{
		Format: schemas.ManifestFormat, Run: run, Iteration: iteration, PolicyVersion: version, Model: d,
		RoutingEncoding: routing.Packed.String(), RoutingDType: routing.DType(d.Experts), SchemaVersions: map[string]string{},
		Chunks: 1, Tokens: 1, Attempts: 1,
		TokenFiles:      []schemas.FileRef{Ref(run, schemas.TokensTable, "tokens")},
		RoutingFiles:    []schemas.FileRef{Ref(run, schemas.RoutingTable, "routing")},
		ValueFiles:      []schemas.FileRef{Ref(run, schemas.ValuesTable, "values")},
		RewardFiles:     []schemas.FileRef{Ref(run, schemas.RewardsTable, "rewards")},
		TrajectoryFiles: []schemas.FileRef{Ref(run, schemas.TrajectoriesTable, "trajectory")},
	}
	for _, t := range []schemas.Table{schemas.TokensTable, schemas.RoutingTable, schemas.ValuesTable, schemas.RewardsTable, schemas.TrajectoriesTable} {
		m.SchemaVersions[t.Name] = t.Version.String()
	}
	return m
}

// ManifestReadFaults stores Manifest(run, 0, 0) and checks that a stage
// that reads a batch manifest fails retryably when the store fails while
// it does: at the manifest's check (Stat), its opening or its body. event
// is the event naming the manifest; newStage builds the stage on a store.
func ManifestReadFaults(t *testing.T, run string, event func(schemas.ObjectRef) engine.Event, newStage func(store.ObjectStore) engine.Stage) {
	t.Helper()
	st := testinfra.FreshStore(t)
	ref, err := schemas.WriteManifest(context.Background(), st, Manifest(run, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []errorstore.Fault{{Op: errorstore.Stat}, {Op: errorstore.Get}, {Op: errorstore.Get, After: true}} {
		testinfra.FailsRetryably(t, newStage(errorstore.New(st, f)), event(ref))
	}
}
