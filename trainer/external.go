package trainer

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

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/store"
)

// WeightsIndexFile lists the shards of a Hugging Face model's weights
// (model-00001-of-00016.safetensors, …), as large models are saved.
const WeightsIndexFile = "model.safetensors.index.json"

// An external trainer may train a model of another architecture than the
// reference MoE (Qwen3-MoE, …) and report a Hugging Face checkpoint of it.
// t1 never runs such a model, so it checks what it relies on and stores
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

// externalShape reads where's config.json and reports whether it is an
// external architecture's, with its shape. A config.json that is missing
// or the reference model's is left to the reference loader (external
// false), whose errors name the problem.
func externalShape(ctx context.Context, st store.ObjectStore, where string) (c moe.Config, modelType string, external bool, err error) {
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
			return moe.Config{}, "", false, nil
		}
		if filepath.IsAbs(where) {
			return moe.Config{}, "", false, Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
		}
		return moe.Config{}, "", false, fmt.Errorf("the trainer's checkpoint %s: %w", where, err)
	}
	c, modelType, err = moe.ParseShape(b)
	if err != nil {
		return moe.Config{}, "", false, Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
	}
	return c, modelType, modelType != moe.ModelType, nil
}

// adoptExternal checks an external architecture's checkpoint at where
// and stores its files under prefix, the weights last, so that their
// presence marks a complete checkpoint as it does for the reference
// model's.
func adoptExternal(ctx context.Context, st store.ObjectStore, where, prefix string, c moe.Config, modelType string, fits func(moe.Config) error) error {
	files, err := listCheckpoint(ctx, st, where)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, f := range files {
		have[f.name] = true
	}
	if !have[moe.WeightsFile] && !have[WeightsIndexFile] {
		return Bad(fmt.Errorf("the trainer's checkpoint %s (model_type %q) has no weights: want %s or %s with its shards", where, modelType, moe.WeightsFile, WeightsIndexFile))
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
		return Bad(fmt.Errorf("the trainer's checkpoint %s (model_type %q) has no %s: rollouts tokenise with the model's own tokenizer, so a checkpoint carries it", where, modelType, moe.TokenizerFile))
	}
	tok, err := moe.ReadTokenizer(tokFiles)
	if err != nil {
		return Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
	}
	if tok.VocabSize() > c.Vocab {
		return Bad(fmt.Errorf("the trainer's checkpoint %s: its tokenizer has %d ids, its config.json vocab_size only %d", where, tok.VocabSize(), c.Vocab))
	}
	if fits != nil {
		if err := fits(c); err != nil {
			return Bad(fmt.Errorf("the trainer's checkpoint %s (model_type %q) has %w", where, modelType, err))
		}
	}
	if where == prefix {
		return nil
	}
	last := func(name string) bool { return name == moe.WeightsFile || name == WeightsIndexFile }
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
			return nil, Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
		}
		for _, e := range entries {
			p := filepath.Join(where, e.Name())
			fi, err := os.Stat(p) // a model cache links its files
			if err != nil {
				return nil, Bad(fmt.Errorf("the trainer's checkpoint %s: %w", where, err))
			}
			if fi.IsDir() {
				if strings.HasPrefix(e.Name(), ".") {
					continue
				}
				return nil, Bad(fmt.Errorf("the trainer's checkpoint %s holds a directory %s: a Hugging Face checkpoint is a flat directory of files", where, e.Name()))
			}
			if !fi.Mode().IsRegular() {
				return nil, Bad(fmt.Errorf("the trainer's checkpoint %s: %s is not a regular file", where, e.Name()))
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
