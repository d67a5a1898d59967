package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// Chunk is one training sequence of a batch: its token row, the routing
// the sampler recorded for every token ([T, L, K]; the last token's row
// repeats the one before, see stages/rollout), and the critic's row once
// the critic has run.
type Chunk struct {
	Tokens  schemas.TokenRow
	Routing moe.Routing
	Values  *schemas.ValueRow
}

// IDs returns the chunk's token ids as ints.
func (c *Chunk) IDs() []int {
	ids := make([]int, len(c.Tokens.TokenIDs))
	for i, id := range c.Tokens.TokenIDs {
		ids[i] = int(id)
	}
	return ids
}

// Attempt is one attempt's chunks in order and its reward.
type Attempt struct {
	TaskID  string
	Attempt int32
	Chunks  []*Chunk
	Reward  schemas.RewardRow
}

// Solved reports whether the attempt passed every assertion (or, without
// per-assertion results, the binary outcome was a pass).
func (a *Attempt) Solved() bool {
	r := a.Reward
	if r.Fallback {
		return r.Reward > 0
	}
	return r.Total > 0 && r.Passed == r.Total
}

// Batch is a whole PPO batch in memory, attempts ordered by task id and
// attempt number.
type Batch struct {
	Manifest *schemas.BatchManifest
	Attempts []*Attempt
	// Actions counts loss-mask tokens (the tokens PPO trains on).
	Actions int
}

// Chunks returns every chunk of the batch in attempt order.
func (b *Batch) Chunks() []*Chunk {
	var out []*Chunk
	for _, a := range b.Attempts {
		out = append(out, a.Chunks...)
	}
	return out
}

type chunkKey struct {
	task           string
	attempt, chunk int32
}

type attemptKey struct {
	task    string
	attempt int32
}

// Load reads every object the manifest lists, verifying sizes and
// SHA-256, and joins tokens, routing, rewards and (when present) values
// per chunk. Disagreements between the tables are BadInputErrors naming
// the objects and the chunk; store failures are returned as they are.
func Load(ctx context.Context, st store.ObjectStore, m *schemas.BatchManifest) (*Batch, error) {
	if err := m.Validate(); err != nil {
		return nil, Bad(err)
	}
	var (
		toks    []schemas.TokenRow
		routes  []schemas.RoutingRow
		vals    []schemas.ValueRow
		rewards []schemas.RewardRow
	)
	if err := ReadRows(ctx, st, m.TokenFiles, &toks); err != nil {
		return nil, err
	}
	if err := ReadRows(ctx, st, m.RoutingFiles, &routes); err != nil {
		return nil, err
	}
	if err := ReadRows(ctx, st, m.ValueFiles, &vals); err != nil {
		return nil, err
	}
	if err := ReadRows(ctx, st, m.RewardFiles, &rewards); err != nil {
		return nil, err
	}
	if err := schemas.CheckAligned("token_files", toks, "routing_files", routes); err != nil {
		return nil, Bad(err)
	}
	b := &Batch{Manifest: m}
	chunks := map[chunkKey]*Chunk{}
	atts := map[attemptKey]*Attempt{}
	for _, t := range toks {
		if len(t.LogProbs) != len(t.TokenIDs) || len(t.LossMask) != len(t.TokenIDs) {
			return nil, Bad(fmt.Errorf("tokens of task %s attempt %d chunk %d: %d ids, %d log-probs, %d mask entries",
				t.TaskID, t.Attempt, t.Chunk, len(t.TokenIDs), len(t.LogProbs), len(t.LossMask)))
		}
		if len(t.TokenIDs) > 0 && t.LossMask[0] {
			return nil, Bad(fmt.Errorf("tokens of task %s attempt %d chunk %d: token 0 is in the loss region, but nothing predicts it", t.TaskID, t.Attempt, t.Chunk))
		}
		c := &Chunk{Tokens: t}
		chunks[chunkKey{t.TaskID, t.Attempt, t.Chunk}] = c
		ak := attemptKey{t.TaskID, t.Attempt}
		a := atts[ak]
		if a == nil {
			a = &Attempt{TaskID: t.TaskID, Attempt: t.Attempt}
			atts[ak] = a
		}
		a.Chunks = append(a.Chunks, c)
		for _, l := range t.LossMask {
			if l {
				b.Actions++
			}
		}
	}
	d := m.Model
	for _, r := range routes {
		where := fmt.Sprintf("routing of task %s attempt %d chunk %d", r.TaskID, r.Attempt, r.Chunk)
		rec, err := r.Decode()
		if err != nil {
			return nil, Bad(err)
		}
		if rec.Layers != d.Layers || rec.TopK != d.TopK || rec.Experts != d.Experts {
			return nil, Bad(fmt.Errorf("%s: %d layers, top-%d of %d experts; the manifest's model has %d, top-%d of %d",
				where, rec.Layers, rec.TopK, rec.Experts, d.Layers, d.TopK, d.Experts))
		}
		mr := moe.NewRouting(rec.Tokens, rec.Layers, rec.TopK)
		for t := range rec.Tokens {
			for l := range rec.Layers {
				set := mr.At(t, l)
				for j := range set {
					set[j] = int32(rec.At(t, l, j))
				}
			}
		}
		chunks[chunkKey{r.TaskID, r.Attempt, r.Chunk}].Routing = mr
	}
	if len(m.ValueFiles) > 0 {
		seen := map[chunkKey]bool{}
		for i := range vals {
			v := &vals[i]
			k := chunkKey{v.TaskID, v.Attempt, v.Chunk}
			c := chunks[k]
			if c == nil {
				return nil, Bad(fmt.Errorf("value_files hold task %s attempt %d chunk %d, which token_files lack", v.TaskID, v.Attempt, v.Chunk))
			}
			if seen[k] {
				return nil, Bad(fmt.Errorf("value_files: task %s attempt %d chunk %d appears twice", v.TaskID, v.Attempt, v.Chunk))
			}
			seen[k] = true
			n := len(c.Tokens.TokenIDs)
			if len(v.Values) != n || len(v.Advantages) != n || len(v.Returns) != n {
				return nil, Bad(fmt.Errorf("values of task %s attempt %d chunk %d: %d values, %d advantages, %d returns for %d tokens",
					v.TaskID, v.Attempt, v.Chunk, len(v.Values), len(v.Advantages), len(v.Returns), n))
			}
			c.Values = v
		}
	}
	for _, r := range rewards {
		a := atts[attemptKey{r.TaskID, r.Attempt}]
		if a == nil {
			return nil, Bad(fmt.Errorf("reward_files hold task %s attempt %d, which token_files lack", r.TaskID, r.Attempt))
		}
		a.Reward = r
	}
	for k, a := range atts {
		if a.Reward.Run == "" && a.Reward.TaskID == "" {
			return nil, Bad(fmt.Errorf("task %s attempt %d has tokens but no reward row", k.task, k.attempt))
		}
		slices.SortFunc(a.Chunks, func(x, y *Chunk) int { return int(x.Tokens.Chunk) - int(y.Tokens.Chunk) })
		for i, c := range a.Chunks {
			if int(c.Tokens.Chunk) != i {
				return nil, Bad(fmt.Errorf("task %s attempt %d: chunk %d missing (found chunk %d in its place)", k.task, k.attempt, i, c.Tokens.Chunk))
			}
		}
		b.Attempts = append(b.Attempts, a)
	}
	slices.SortFunc(b.Attempts, func(x, y *Attempt) int {
		if x.TaskID != y.TaskID {
			if x.TaskID < y.TaskID {
				return -1
			}
			return 1
		}
		return int(x.Attempt) - int(y.Attempt)
	})
	return b, nil
}

// ReadRows appends the rows of every referenced object to out. A failing
// Get is returned as is (it may be transient); a missing object, or bytes
// that do not match the reference or do not decode, are a BadInputError.
func ReadRows[T schemas.Row](ctx context.Context, st store.ObjectStore, refs []schemas.FileRef, out *[]T) error {
	for i := range refs {
		ref := &refs[i]
		var zero T
		rc, _, err := st.Get(ctx, ref.Key)
		var o *schemas.Object
		switch {
		case errors.Is(err, store.ErrNotFound):
			// A compaction may have taken the object in, and its record
			// serves the claim check.
			if o, err = schemas.Fetch(ctx, st, ref.Key, ref, zero.Table().Name); err != nil {
				return Bad(err)
			}
		case err != nil:
			return fmt.Errorf("%s: %w", ref.Key, err)
		default:
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", ref.Key, err)
			}
			if o, err = schemas.Parse(ref.Key, data, ref, zero.Table().Name); err != nil {
				return Bad(err)
			}
		}
		rows, err := schemas.DecodeRows[T](o)
		if err != nil {
			return Bad(err)
		}
		*out = append(*out, rows...)
	}
	return nil
}

// ReadManifest reads and validates the batch manifest ref claims. A
// manifest that is missing, does not match ref or does not validate is a
// BadInputError; a store that cannot be reached is returned as is.
func ReadManifest(ctx context.Context, st store.ObjectStore, ref schemas.ObjectRef) (*schemas.BatchManifest, error) {
	if ref.Key == "" {
		return nil, Bad(errors.New("no batch manifest"))
	}
	if _, err := st.Stat(ctx, ref.Key); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, Bad(fmt.Errorf("batch manifest %s: %w", ref.Key, err))
		}
		return nil, fmt.Errorf("batch manifest %s: %w", ref.Key, err)
	}
	// Fetched here rather than by schemas.ReadManifest, so that a store
	// failing mid-read stays retryable and only the bytes that arrived are
	// judged.
	rc, _, err := st.Get(ctx, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("batch manifest %s: %w", ref.Key, err)
	}
	data, err := io.ReadAll(io.LimitReader(rc, schemas.MaxManifestBytes))
	rc.Close()
	if err != nil {
		return nil, fmt.Errorf("batch manifest %s: %w", ref.Key, err)
	}
	m, err := schemas.ParseManifest(ref, data)
	if err != nil {
		return nil, Bad(err)
	}
	return m, nil
}
