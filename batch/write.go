package batch

import (
	"context"
	"fmt"

	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
)

// Rows are the table rows of a batch, as rollout and reward stored them.
type Rows struct {
	Tokens       []schemas.TokenRow
	Routing      []schemas.RoutingRow
	Rewards      []schemas.RewardRow
	Trajectories []schemas.TrajectoryRow
}

// Write writes rows as one object per table (routing re-encoded as
// packed, so a GPU trainer can view the ids without decoding), builds the
// batch manifest, validates it and stores it. It returns the manifest and
// its claim check.
func Write(ctx context.Context, st store.ObjectStore, run string, iteration int, policyVersion int64, dims schemas.ModelDims, rows Rows) (*schemas.BatchManifest, schemas.ObjectRef, error) {
	m := &schemas.BatchManifest{
		Format: schemas.ManifestFormat, Run: run, Iteration: iteration, PolicyVersion: policyVersion, Model: dims,
		RoutingEncoding: routing.Packed.String(), RoutingDType: routing.DType(dims.Experts), SchemaVersions: map[string]string{},
		Chunks: int64(len(rows.Tokens)), Attempts: int64(len(rows.Rewards)),
	}
	for _, t := range rows.Tokens {
		m.Tokens += int64(len(t.TokenIDs))
	}
	packed := make([]schemas.RoutingRow, len(rows.Routing))
	for i, r := range rows.Routing {
		if r.Encoding == routing.Packed.String() {
			packed[i] = r
			continue
		}
		rec, err := r.Decode()
		if err != nil {
			return nil, schemas.ObjectRef{}, Bad(err)
		}
		if packed[i], err = schemas.NewRoutingRow(r.Run, r.TaskID, int(r.Attempt), int(r.Chunk), rec, routing.Packed); err != nil {
			return nil, schemas.ObjectRef{}, Bad(err)
		}
		packed[i].PolicyVersion, packed[i].Iteration = r.PolicyVersion, r.Iteration
	}
	wo := schemas.WriterOptions{}
	steps := []struct {
		dst  *[]schemas.FileRef
		save func() (schemas.FileRef, error)
	}{
		{&m.TokenFiles, func() (schemas.FileRef, error) { return schemas.WriteTable(ctx, st, run, iteration, rows.Tokens, wo) }},
		{&m.RoutingFiles, func() (schemas.FileRef, error) { return schemas.WriteTable(ctx, st, run, iteration, packed, wo) }},
		{&m.RewardFiles, func() (schemas.FileRef, error) { return schemas.WriteTable(ctx, st, run, iteration, rows.Rewards, wo) }},
		{&m.TrajectoryFiles, func() (schemas.FileRef, error) {
			return schemas.WriteTable(ctx, st, run, iteration, rows.Trajectories, wo)
		}},
	}
	var err error
	for _, s := range steps {
		var ref schemas.FileRef
		if ref, err = s.save(); err != nil {
			break
		}
		m.SchemaVersions[ref.Table] = ref.SchemaVersion
		*s.dst = append(*s.dst, ref)
	}
	if err != nil {
		return nil, schemas.ObjectRef{}, fmt.Errorf("write batch: %w", err)
	}
	ref, err := schemas.WriteManifest(ctx, st, m)
	if err != nil {
		return nil, schemas.ObjectRef{}, err
	}
	return m, ref, nil
}

// WithValues writes the critic's value rows of m's batch as one object and
// stores a copy of m that lists it, returning the copy and its claim
// check. m itself is not changed.
func WithValues(ctx context.Context, st store.ObjectStore, m *schemas.BatchManifest, values []schemas.ValueRow) (*schemas.BatchManifest, schemas.FileRef, schemas.ObjectRef, error) {
	ref, err := schemas.WriteTable(ctx, st, m.Run, m.Iteration, values, schemas.WriterOptions{})
	if err != nil {
		return nil, schemas.FileRef{}, schemas.ObjectRef{}, fmt.Errorf("values: %w", err)
	}
	c := *m
	c.SchemaVersions = map[string]string{}
	for k, v := range m.SchemaVersions {
		c.SchemaVersions[k] = v
	}
	c.SchemaVersions[ref.Table] = ref.SchemaVersion
	c.ValueFiles = []schemas.FileRef{ref}
	mref, err := schemas.WriteManifest(ctx, st, &c)
	if err != nil {
		return nil, schemas.FileRef{}, schemas.ObjectRef{}, Bad(err)
	}
	return &c, ref, mref, nil
}
