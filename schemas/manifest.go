package schemas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas/routing"
	"github.com/t1pipe/t1/store"
)

// ManifestFormat is the version of the BatchManifest JSON.
const ManifestFormat = 1

// BatchManifest lists the Parquet objects of one PPO batch: what the GPU
// update stage (or an external trainer) reads. Row counts and hashes let
// the reader verify every object before training on it.
type BatchManifest struct {
	Format    int    `json:"format"`
	Run       string `json:"run"`
	Iteration int    `json:"iteration"`
	// PolicyVersion is the policy that sampled the batch (the behaviour
	// policy); Staleness how many versions newer the policy it trains is
	// (training.max_staleness bounds it; 0 in a synchronous run).
	PolicyVersion int64     `json:"policy_version"`
	Staleness     int64     `json:"staleness,omitempty"`
	Model         ModelDims `json:"model"`
	// RoutingEncoding is the routing codec encoding of every routing row;
	// "packed" lets a trainer view RoutingRow.Record[ids_offset:] as
	// [T, L, k] of RoutingDType without decoding.
	RoutingEncoding string `json:"routing_encoding"`
	RoutingDType    string `json:"routing_dtype"` // numpy dtype: <u1 or <u2
	// SchemaVersions maps table name to the MAJOR.MINOR its objects use.
	SchemaVersions map[string]string `json:"schema_versions"`
	Chunks         int64             `json:"chunks"`
	Tokens         int64             `json:"tokens"`
	Attempts       int64             `json:"attempts"`
	TokenFiles     []FileRef         `json:"token_files"`
	RoutingFiles   []FileRef         `json:"routing_files"`
	// ValueFiles is empty until the critic has run.
	ValueFiles      []FileRef `json:"value_files,omitempty"`
	RewardFiles     []FileRef `json:"reward_files"`
	TrajectoryFiles []FileRef `json:"trajectory_files"`
}

// Validate checks the manifest's internal consistency: known format, model
// dimensions a routing record can have, file references of the right
// tables and readable schema versions, and row counts that agree (one
// token row, one routing row and, once present, one value row per chunk).
func (m *BatchManifest) Validate() error {
	if m.Format != ManifestFormat {
		return fmt.Errorf("batch manifest: format %d, this build reads %d", m.Format, ManifestFormat)
	}
	if m.Staleness < 0 {
		return fmt.Errorf("batch manifest: staleness %d is negative", m.Staleness)
	}
	if err := keys.ValidRun(m.Run); err != nil {
		return fmt.Errorf("batch manifest: %w", err)
	}
	d := m.Model
	if d.Vocab < 1 {
		return fmt.Errorf("batch manifest: model vocab %d", d.Vocab)
	}
	if _, err := routing.NewRecord(0, d.Layers, d.TopK, d.Experts); err != nil {
		return fmt.Errorf("batch manifest: model: %w", err)
	}
	if m.RoutingEncoding != routing.Packed.String() {
		return fmt.Errorf("batch manifest: routing_encoding %q, want %q", m.RoutingEncoding, routing.Packed)
	}
	if want := routing.DType(d.Experts); m.RoutingDType != want {
		return fmt.Errorf("batch manifest: routing_dtype %q, want %q for %d experts", m.RoutingDType, want, d.Experts)
	}
	groups := []struct {
		field string
		table Table
		refs  []FileRef
	}{
		{"token_files", TokensTable, m.TokenFiles},
		{"routing_files", RoutingTable, m.RoutingFiles},
		{"value_files", ValuesTable, m.ValueFiles},
		{"reward_files", RewardsTable, m.RewardFiles},
		{"trajectory_files", TrajectoriesTable, m.TrajectoryFiles},
	}
	rows := map[string]int64{}
	for _, g := range groups {
		for i, f := range g.refs {
			if err := checkRef(f, g.table); err != nil {
				return fmt.Errorf("batch manifest: %s[%d]: %w", g.field, i, err)
			}
			if v := m.SchemaVersions[g.table.Name]; v != f.SchemaVersion {
				return fmt.Errorf("batch manifest: %s[%d] %s: schema version %s, schema_versions says %q",
					g.field, i, f.Key, f.SchemaVersion, v)
			}
			rows[g.field] += f.Rows
		}
	}
	if len(m.TokenFiles) == 0 {
		return errors.New("batch manifest: no token_files")
	}
	if rows["token_files"] != m.Chunks || rows["routing_files"] != m.Chunks {
		return fmt.Errorf("batch manifest: %d chunks, but token files hold %d rows and routing files %d",
			m.Chunks, rows["token_files"], rows["routing_files"])
	}
	if len(m.ValueFiles) > 0 && rows["value_files"] != m.Chunks {
		return fmt.Errorf("batch manifest: %d chunks, but value files hold %d rows", m.Chunks, rows["value_files"])
	}
	if rows["reward_files"] != m.Attempts || rows["trajectory_files"] != m.Attempts {
		return fmt.Errorf("batch manifest: %d attempts, but reward files hold %d rows and trajectory files %d",
			m.Attempts, rows["reward_files"], rows["trajectory_files"])
	}
	return nil
}

func checkRef(f FileRef, t Table) error {
	if f.Key == "" {
		return errors.New("empty key")
	}
	if f.Table != t.Name {
		return fmt.Errorf("%s: table %q, want %q", f.Key, f.Table, t.Name)
	}
	if _, _, err := CheckMetadata(f.Key, f.Table, f.SchemaVersion, t.Name); err != nil {
		return err
	}
	if f.Rows < 0 || f.Bytes <= 0 {
		return fmt.Errorf("%s: %d rows, %d bytes", f.Key, f.Rows, f.Bytes)
	}
	if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("%s: sha256 %q is not 64 hex digits", f.Key, f.SHA256)
	}
	return nil
}

// WriteManifest validates m and stores it under its content hash
// (keys.Manifest).
func WriteManifest(ctx context.Context, st store.ObjectStore, m *BatchManifest) (ObjectRef, error) {
	if err := m.Validate(); err != nil {
		return ObjectRef{}, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return ObjectRef{}, fmt.Errorf("batch manifest: %w", err)
	}
	b = append(b, '\n')
	sum := sha256.Sum256(b)
	ref := ObjectRef{Key: keys.Manifest(m.Run, m.Iteration, hex.EncodeToString(sum[:])), Bytes: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}
	_, err = st.PutIfAbsent(ctx, ref.Key, bytes.NewReader(b), int64(len(b)), store.PutOptions{
		ContentType: "application/json", Metadata: map[string]string{"sha256": ref.SHA256},
	})
	if err != nil && !errors.Is(err, store.ErrExists) {
		return ObjectRef{}, fmt.Errorf("%s: %w", ref.Key, err)
	}
	return ref, nil
}

// ReadManifest fetches, verifies (size and SHA-256 against ref) and
// validates a batch manifest.
func ReadManifest(ctx context.Context, st store.ObjectStore, ref ObjectRef) (*BatchManifest, error) {
	rc, _, err := st.Get(ctx, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref.Key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxManifestBytes))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref.Key, err)
	}
	return ParseManifest(ref, b)
}

// MaxManifestBytes bounds a batch manifest read back.
const MaxManifestBytes = 64 << 20

// ParseManifest verifies the bytes of the manifest at ref (size and
// SHA-256) and decodes and validates them. Every error it returns is a
// problem of the manifest itself, never of the store.
func ParseManifest(ref ObjectRef, b []byte) (*BatchManifest, error) {
	sum := sha256.Sum256(b)
	if int64(len(b)) != ref.Bytes || hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, fmt.Errorf("%s: %d bytes with SHA-256 %x, the reference says %d bytes, %s", ref.Key, len(b), sum, ref.Bytes, ref.SHA256)
	}
	var m BatchManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", ref.Key, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", ref.Key, err)
	}
	return &m, nil
}
