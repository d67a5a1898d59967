package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/tokenizer"
)

// An external trainer may train a model t1 does not run — a real
// Qwen3-MoE tens of GB large, or another architecture — and report a
// Hugging Face checkpoint of it. t1 checks what it relies on and stores
// the files as they are: config.json gives dimensions that fit the
// batch (moe.ParseShape), tokenizer.json is one t1 tokenises with (with
// the files beside it, the chat template above all), and there are
// weights, model.safetensors or an index of shards.

// checkpointFile is one file of a checkpoint being adopted.
type checkpointFile struct {
	name string
	size int64
	open func() (io.ReadCloser, error)
}

// readShape reads where's config.json: the model's shape and model_type,
// or modelType "" when there is no config.json.
func readShape(ctx context.Context, st store.ObjectStore, where string) (c moe.Config, modelType string, err error) {
	var b []byte
	if filepath.IsAbs(where) {
		b, err = os.ReadFile(filepath.Join(where, moe.ConfigFile))
	} else {
		var rc io.ReadCloser
		if rc, _, err = st.Get(ctx, path.Join(where, moe.ConfigFile)); err == nil {
			b, err = io.ReadAll(io.LimitReader(rc, 1<<20))
			rc.Close()
		}
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, store.ErrNotFound) {
			return moe.Config{}, "", nil
		}
		if filepath.IsAbs(where) {
			return moe.Config{}, "", batch.Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
		}
		return moe.Config{}, "", fmt.Errorf("the trainer's checkpoint %s: %w", where, err)
	}
	c, modelType, err = moe.ParseShape(b)
	if err != nil {
		return moe.Config{}, "", batch.Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
	}
	return c, modelType, nil
}

// adoptFiles checks the checkpoint at where (shape c of model_type
// modelType) without reading its weights and stores its files under
// prefix, the weights last, so that their presence marks a complete
// checkpoint.
func adoptFiles(ctx context.Context, st store.ObjectStore, where, prefix string, c moe.Config, modelType string, fits func(moe.Config) error) error {
	files, err := listCheckpoint(ctx, st, where)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, f := range files {
		have[f.name] = true
	}
	if !have[moe.WeightsFile] && !have[moe.WeightsIndexFile] {
		return batch.Bad(fmt.Errorf("the trainer's checkpoint %s (model_type %q) has no weights: want %s or %s with its shards", where, modelType, moe.WeightsFile, moe.WeightsIndexFile))
	}
	if !have[moe.WeightsFile] {
		if err := checkShards(files, have, where); err != nil {
			return err
		}
	}
	tokFiles := map[string][]byte{}
	for _, f := range files {
		if f.name != moe.TokenizerFile && !slices.Contains(moe.TokenizerCompanions(), f.name) {
			continue
		}
		rc, err := f.open()
		if err != nil {
			return fmt.Errorf("the trainer's checkpoint %s: %w", where, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, 64<<20))
		rc.Close()
		if err != nil {
			return fmt.Errorf("the trainer's checkpoint %s: %w", where, err)
		}
		tokFiles[f.name] = b
	}
	if _, ok := tokFiles[moe.TokenizerFile]; !ok {
		return batch.Bad(fmt.Errorf("the trainer's checkpoint %s (model_type %q) has no %s: rollouts tokenise with the model's own tokenizer, so a checkpoint carries it", where, modelType, moe.TokenizerFile))
	}
	tok, err := moe.ReadTokenizer(tokFiles)
	if err != nil {
		return batch.Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
	}
	if tok.VocabSize() > c.Vocab {
		return batch.Bad(fmt.Errorf("the trainer's checkpoint %s: its tokenizer has %d ids, its config.json vocab_size only %d", where, tok.VocabSize(), c.Vocab))
	}
	if fits != nil {
		if err := fits(c); err != nil {
			return batch.Bad(fmt.Errorf("the trainer's checkpoint %s (model_type %q) has %w", where, modelType, err))
		}
	}
	if where == prefix {
		return nil
	}
	last := func(name string) bool { return name == moe.WeightsFile || name == moe.WeightsIndexFile }
	slices.SortStableFunc(files, func(a, b checkpointFile) int {
		if last(a.name) != last(b.name) {
			if last(a.name) {
				return 1
			}
			return -1
		}
		return strings.Compare(a.name, b.name)
	})
	for _, f := range files {
		rc, err := f.open()
		if err != nil {
			return fmt.Errorf("the trainer's checkpoint %s: %w", where, err)
		}
		_, err = st.Put(ctx, path.Join(prefix, f.name), rc, f.size, store.PutOptions{})
		rc.Close()
		if err != nil {
			return fmt.Errorf("store the trainer's checkpoint at %s: %w", prefix, err)
		}
	}
	return nil
}

// listCheckpoint lists the files of a checkpoint directory (an absolute
// local path) or store prefix, top level only. A local directory's
// subdirectories are refused, but for hidden ones (a download tool's
// cache), which are not part of the model.
func listCheckpoint(ctx context.Context, st store.ObjectStore, where string) ([]checkpointFile, error) {
	var files []checkpointFile
	if filepath.IsAbs(where) {
		entries, err := os.ReadDir(where)
		if err != nil {
			return nil, batch.Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
		}
		for _, e := range entries {
			p := filepath.Join(where, e.Name())
			fi, err := os.Stat(p) // a model cache links its files
			if err != nil {
				return nil, batch.Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
			}
			if fi.IsDir() {
				if strings.HasPrefix(e.Name(), ".") {
					continue
				}
				return nil, batch.Bad(fmt.Errorf("the trainer's checkpoint %s holds a directory %s: a Hugging Face checkpoint is a flat directory of files", where, e.Name()))
			}
			if !fi.Mode().IsRegular() {
				return nil, batch.Bad(fmt.Errorf("the trainer's checkpoint %s: %s is not a regular file", where, e.Name()))
			}
			files = append(files, checkpointFile{name: e.Name(), size: fi.Size(), open: func() (io.ReadCloser, error) { return os.Open(p) }})
		}
		return files, nil
	}
	base := strings.TrimSuffix(where, "/") + "/"
	for info, err := range st.List(ctx, base) {
		if err != nil {
			return nil, fmt.Errorf("the trainer's checkpoint %s: %w", where, err)
		}
		name := strings.TrimPrefix(info.Key, base)
		if strings.Contains(name, "/") {
			continue
		}
		key := info.Key
		files = append(files, checkpointFile{name: name, size: info.Size, open: func() (io.ReadCloser, error) {
			rc, _, err := st.Get(ctx, key)
			return rc, err
		}})
	}
	return files, nil
}

// EnsureExternalPolicy is EnsurePolicy's version 0 for a run whose
// initial checkpoint, at checkpoint (an absolute local directory or a
// store prefix), t1 does not run — another architecture, or a Qwen3-MoE
// that an exec trainer trains and a remote engine serves: the nearest run
// of the lineage that stores it, else the checkpoint adopted (checked
// without reading its weights, and stored byte for byte) under runs[0].
func EnsureExternalPolicy(ctx context.Context, st store.ObjectStore, runs []string, checkpoint string) (string, error) {
	prefix, err := EnsurePolicy(ctx, st, runs, 0, nil)
	if err == nil || !batch.IsBad(err) || len(runs) == 0 {
		return prefix, err
	}
	prefix = keys.Policy(runs[0], 0)
	c, modelType, err := readShape(ctx, st, checkpoint)
	if err == nil && modelType == "" {
		err = batch.Bad(fmt.Errorf("the initial checkpoint %s has no %s", checkpoint, moe.ConfigFile))
	}
	if err == nil {
		err = adoptFiles(ctx, st, checkpoint, prefix, c, modelType, nil)
	}
	if err != nil {
		return "", fmt.Errorf("initial policy: %w", err)
	}
	return prefix, nil
}

// CheckInitial checks a run's initial checkpoint directory dir (absolute)
// before the run starts, storing nothing, as EnsureExternalPolicy will
// when it becomes policy version 0 — its dimensions, its tokenizer, its
// weights (every shard its index names), which the trainer starts from.
// Whether its weights load is left to the loader that reads them.
func CheckInitial(ctx context.Context, dir string) error {
	c, modelType, err := readShape(ctx, nil, dir)
	if err != nil || modelType == "" {
		return err
	}
	if err := adoptFiles(ctx, nil, dir, dir, c, modelType, nil); err != nil {
		return fmt.Errorf("inference.checkpoint: %w (t1 run stores it as policy version 0 for the exec trainer to start from; t1 rollout reads none of its weights)", err)
	}
	return nil
}

// LoadTokenizer reads the tokenizer of the checkpoint stored under
// prefix (tokenizer.json and the files beside it) without its weights:
// what sampling from a remote engine needs of a policy.
func LoadTokenizer(ctx context.Context, st store.ObjectStore, prefix string) (tokenizer.Tokenizer, error) {
	files := map[string][]byte{}
	for _, name := range append([]string{moe.TokenizerFile}, moe.TokenizerCompanions()...) {
		rc, _, err := st.Get(ctx, path.Join(prefix, name))
		if errors.Is(err, store.ErrNotFound) && name != moe.TokenizerFile {
			continue
		}
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = batch.Bad(err)
			}
			return nil, fmt.Errorf("checkpoint %s: %w", prefix, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", prefix, err)
		}
		files[name] = b
	}
	tok, err := moe.ReadTokenizer(files)
	if err != nil {
		return nil, batch.Bad(fmt.Errorf("checkpoint %s: %w", prefix, err))
	}
	return tok, nil
}

// Export copies the files of the checkpoint stored under prefix
// into the local directory dir for an engine to load (ExportDir).
func Export(ctx context.Context, st store.ObjectStore, prefix, dir string) (string, error) {
	files, err := listCheckpoint(ctx, st, prefix)
	if err != nil {
		return "", err
	}
	return ExportDir(dir, func(tmp string) error {
		for _, f := range files {
			if err := copyOut(f, filepath.Join(tmp, f.name)); err != nil {
				return fmt.Errorf("export %s: %w", prefix, err)
			}
		}
		return nil
	})
}

// ExportDir makes dir a checkpoint directory for an engine to load,
// unless a complete one is there (another worker exported it): write
// fills a directory beside it, which is renamed into place, so an engine
// never reads half of one. The weights (model.safetensors or a shard
// index) mark it complete.
func ExportDir(dir string, write func(tmp string) error) (string, error) {
	complete := func() bool {
		for _, w := range []string{moe.WeightsFile, moe.WeightsIndexFile} {
			if _, err := os.Stat(filepath.Join(dir, w)); err == nil {
				return true
			}
		}
		return false
	}
	if complete() {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("export to %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+"-")
	if err != nil {
		return "", fmt.Errorf("export to %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	if err := write(tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if complete() {
			return dir, nil
		}
		return "", fmt.Errorf("export to %s: %w", dir, err)
	}
	return dir, nil
}

func copyOut(f checkpointFile, to string) error {
	rc, err := f.open()
	if err != nil {
		return err
	}
	defer rc.Close()
	w, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, rc); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// checkShards refuses a sharded checkpoint whose index does not read or
// names a shard the checkpoint lacks: its claim check is the index, so a
// missing shard would otherwise be stored, exported and digested as if
// the weights were whole.
func checkShards(files []checkpointFile, have map[string]bool, where string) error {
	i := slices.IndexFunc(files, func(f checkpointFile) bool { return f.name == moe.WeightsIndexFile })
	rc, err := files[i].open()
	if err != nil {
		return fmt.Errorf("the trainer's checkpoint %s: %w", where, err)
	}
	b, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	rc.Close()
	if err != nil {
		return fmt.Errorf("the trainer's checkpoint %s: %w", where, err)
	}
	shards, err := moe.WeightShards(b)
	if err != nil {
		return batch.Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
	}
	for _, s := range shards {
		if !have[s] {
			return batch.Bad(fmt.Errorf("the trainer's checkpoint %s: %s names the shard %s, which is not there", where, moe.WeightsIndexFile, s))
		}
	}
	return nil
}
