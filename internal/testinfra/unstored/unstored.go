// Package unstored makes well-formed references to table objects that are
// not stored, for tests of stages that fail, or decide, before they read
// them. (It is apart from testinfra, which the schemas tests import.)
package unstored

import (
	"strings"

	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
)

// Ref is a well-formed reference to a one-row object of table that
// is not stored, for manifests and events that are written, not read.
func Ref(run string, table schemas.Table, name string) schemas.FileRef {
	return schemas.FileRef{Key: "runs/" + run + "/" + table.Name + "/" + name + ".parquet", Table: table.Name,
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
