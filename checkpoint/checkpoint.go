package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// Ref is the claim check of a checkpoint stored under prefix:
// the prefix as key, and the size and SHA-256 of its weights file (of an
// external model's shard index when its weights are sharded).
func Ref(ctx context.Context, st store.ObjectStore, prefix string) (schemas.ObjectRef, error) {
	key := path.Join(prefix, moe.WeightsFile)
	rc, _, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		// An external model's sharded weights: the index names every shard.
		rc, _, err = st.Get(ctx, path.Join(prefix, moe.WeightsIndexFile))
	}
	if err != nil {
		return schemas.ObjectRef{}, fmt.Errorf("checkpoint %s: %w", prefix, err)
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return schemas.ObjectRef{}, fmt.Errorf("checkpoint %s: %w", prefix, err)
	}
	return schemas.ObjectRef{Key: prefix, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Load loads the checkpoint under prefix. A missing or
// unreadable checkpoint is a BadInputError; a store that cannot be
// reached is returned as is.
func Load(ctx context.Context, st store.ObjectStore, prefix string) (*moe.Checkpoint, error) {
	if _, err := st.Stat(ctx, path.Join(prefix, moe.WeightsFile)); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("checkpoint %s: %w", prefix, err)
		}
		if _, ierr := st.Stat(ctx, path.Join(prefix, moe.WeightsIndexFile)); ierr != nil {
			return nil, batch.Bad(fmt.Errorf("checkpoint %s: %w", prefix, err))
		}
	}
	ck, err := moe.Load(ctx, st, prefix)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, batch.Bad(fmt.Errorf("checkpoint %s does not load: %w", prefix, err))
	}
	return ck, nil
}

// LoadPolicy loads the policy under prefix: a critic there is a
// BadInputError.
func LoadPolicy(ctx context.Context, st store.ObjectStore, prefix string) (*moe.Checkpoint, error) {
	ck, err := Load(ctx, st, prefix)
	if err != nil {
		return nil, err
	}
	if ck.Model.Head != moe.LMHead {
		return nil, batch.Bad(fmt.Errorf("checkpoint %s is a critic (%s), not a policy (%s)", prefix, moe.CriticArchitecture, moe.Architecture))
	}
	return ck, nil
}

// EnsurePolicy returns the prefix of policy version v for a run whose
// lineage is runs (the run, then its ancestors: engine.Log.Lineage): the
// nearest run that stores it, so a branch trains and samples the parent's
// checkpoints it did not make itself. Version 0, stored by none, is
// created from initial under runs[0]. Any other missing version (or a
// missing version 0 without initial) is a BadInputError.
func EnsurePolicy(ctx context.Context, st store.ObjectStore, runs []string, v int64, initial func(context.Context) (*moe.Checkpoint, error)) (string, error) {
	if len(runs) == 0 {
		return "", batch.Bad(errors.New("policy: no run"))
	}
	for _, run := range runs {
		prefix := keys.Policy(run, v)
		_, err := st.Stat(ctx, path.Join(prefix, moe.WeightsFile))
		if errors.Is(err, store.ErrNotFound) {
			// An external model's sharded weights, stored after their shards.
			_, err = st.Stat(ctx, path.Join(prefix, moe.WeightsIndexFile))
		}
		if err == nil {
			return prefix, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return "", fmt.Errorf("policy %d: %w", v, err)
		}
	}
	prefix := keys.Policy(runs[0], v)
	if v != 0 || initial == nil {
		return "", batch.Bad(fmt.Errorf("policy %d: no checkpoint at %s (lineage %v)", v, prefix, runs))
	}
	ck, err := initial(ctx)
	if err != nil {
		return "", batch.Bad(fmt.Errorf("initial policy: %w", err))
	}
	ck.Meta = map[string]string{"policy_version": "0"}
	ck.Optimizer = nil
	if err := ck.Save(ctx, st, prefix); err != nil {
		return "", fmt.Errorf("initial policy: %w", err)
	}
	return prefix, nil
}

// PolicyFits checks that a policy of shape c can train on a batch sampled
// from a model of dimensions d: its vocabulary covers d's and its routing
// has d's layers, top-k and experts.
func PolicyFits(c moe.Config, d schemas.ModelDims) error {
	if c.Vocab < d.Vocab || c.Layers != d.Layers || c.TopK != d.TopK || c.Experts != d.Experts {
		return fmt.Errorf("vocab %d, %d layers, top-%d of %d experts; the batch was sampled from vocab %d, %d layers, top-%d of %d",
			c.Vocab, c.Layers, c.TopK, c.Experts, d.Vocab, d.Layers, d.TopK, d.Experts)
	}
	return nil
}

// CriticFits checks that a critic of shape c can value a batch sampled
// from a model of dimensions d: its vocabulary covers d's (its own
// routing is its own business).
func CriticFits(c moe.Config, d schemas.ModelDims) error {
	if c.Vocab < d.Vocab {
		return fmt.Errorf("critic vocabulary %d does not cover the policy's %d", c.Vocab, d.Vocab)
	}
	return nil
}

// Adopt makes the checkpoint a trainer reported — an object-store prefix,
// or an absolute local directory an external trainer wrote — the one at
// prefix: it checks what t1 relies on without reading the weights (a
// real model's are tens of GB, and whatever runs them reads them): its
// config.json (fits, when not nil, accepts its shape), its tokenizer,
// and weights that are all there, one file or every shard its index
// names; and stores it under prefix file by file when it is elsewhere. A
// checkpoint that is missing or fails a check is a BadInputError.
func Adopt(ctx context.Context, st store.ObjectStore, where, prefix string, fits func(moe.Config) error) error {
	c, modelType, err := readShape(ctx, st, where)
	if err != nil {
		return err
	}
	if modelType == "" {
		return batch.Bad(fmt.Errorf("the trainer's checkpoint %s: no %s", where, moe.ConfigFile))
	}
	return adoptFiles(ctx, st, where, prefix, c, modelType, fits)
}

// LatestCritic returns the newest critic version at most maxVersion of a
// run whose lineage is runs (the run, then its ancestors), and its prefix:
// of equal versions the nearest run's, so a branch's own critic comes
// before its parent's. prefix is "" (and version 0) when there is none,
// so the critic starts fresh. A critic is found by its weights as stored
// last: model.safetensors, or an external model's shard index.
func LatestCritic(ctx context.Context, st store.ObjectStore, runs []string, maxVersion int64) (int64, string, error) {
	best, prefix := int64(-1), ""
	for _, run := range runs {
		base := keys.Critics(run)
		for info, err := range st.List(ctx, base) {
			if err != nil {
				return 0, "", fmt.Errorf("list critics: %w", err)
			}
			dir, file, ok := strings.Cut(strings.TrimPrefix(info.Key, base), "/")
			if !ok || (file != moe.WeightsFile && file != moe.WeightsIndexFile) || !strings.HasPrefix(dir, "v") {
				continue
			}
			v, err := strconv.ParseInt(dir[1:], 10, 64)
			if err == nil && v <= maxVersion && v > best {
				best, prefix = v, keys.Critic(run, v)
			}
		}
	}
	if best < 0 {
		return 0, "", nil
	}
	return best, prefix, nil
}
