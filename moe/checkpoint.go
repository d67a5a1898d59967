package moe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/tokenizer"
)

// Checkpoint file names, in a local directory or under a store prefix.
const (
	ConfigFile    = "config.json"
	TokenizerFile = tokenizer.File
	WeightsFile   = "model.safetensors"
	// OptimizerFile holds Adam's moments and step (optional), so training
	// resumes exactly where it stopped.
	OptimizerFile = "optimizer.safetensors"
)

// Checkpoint is a model with the tokenizer it was trained with.
type Checkpoint struct {
	Model     *Model
	Tokenizer *Tokenizer
	// Meta is stored in the safetensors __metadata__ (e.g. a policy
	// version); it may be nil.
	Meta map[string]string
	// Optimizer, when set, is saved too; Load restores it when the
	// checkpoint has one.
	Optimizer *Adam
}

func (c *Checkpoint) files() (map[string][]byte, error) {
	if c.Model == nil || c.Tokenizer == nil {
		return nil, errors.New("checkpoint: model and tokenizer are both required")
	}
	if c.Tokenizer.VocabSize() > c.Model.Cfg.Vocab {
		return nil, fmt.Errorf("checkpoint: tokenizer has %d ids, the model only %d", c.Tokenizer.VocabSize(), c.Model.Cfg.Vocab)
	}
	cfg, err := MarshalConfig(c.Model.Cfg)
	if err != nil {
		return nil, err
	}
	tok, err := json.Marshal(c.Tokenizer)
	if err != nil {
		return nil, err
	}
	meta := map[string]string{"format": "pt"}
	for k, v := range c.Meta {
		meta[k] = v
	}
	var w bytes.Buffer
	if err := WriteSafetensors(&w, c.Model.W.Tensors, meta); err != nil {
		return nil, err
	}
	files := map[string][]byte{ConfigFile: cfg, TokenizerFile: tok, WeightsFile: w.Bytes()}
	if c.Optimizer != nil {
		if c.Optimizer.m != c.Model {
			return nil, errors.New("checkpoint: the optimizer belongs to another model")
		}
		var o bytes.Buffer
		if err := WriteSafetensors(&o, c.Optimizer.stateTensors(), c.Optimizer.meta()); err != nil {
			return nil, err
		}
		files[OptimizerFile] = o.Bytes()
	}
	return files, nil
}

// ReadTokenizer reads a checkpoint's tokenizer file: every path that
// tokenises for a model (rollouts, serving, training) takes its tokenizer
// from the model's own files through this one function.
func ReadTokenizer(b []byte) (*Tokenizer, error) {
	tok := &Tokenizer{}
	if err := json.Unmarshal(b, tok); err != nil {
		return nil, err
	}
	return tok, nil
}

// errMissing marks an optional checkpoint file that is absent.
var errMissing = errors.New("optional file missing")

// parseCheckpoint builds a checkpoint from its three files; where names
// the source in errors.
func parseCheckpoint(where string, get func(name string) ([]byte, error)) (*Checkpoint, error) {
	cb, err := get(ConfigFile)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(cb)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", where, ConfigFile, err)
	}
	tb, err := get(TokenizerFile)
	if err != nil {
		return nil, err
	}
	tok, err := ReadTokenizer(tb)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", where, TokenizerFile, err)
	}
	if tok.VocabSize() > cfg.Vocab {
		return nil, fmt.Errorf("%s/%s: %d ids exceed the config's vocab %d", where, TokenizerFile, tok.VocabSize(), cfg.Vocab)
	}
	wb, err := get(WeightsFile)
	if err != nil {
		return nil, err
	}
	tensors, meta, err := ReadSafetensors(wb)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", where, WeightsFile, err)
	}
	m := newModel(cfg)
	if err := loadTensors(m.W, tensors); err != nil {
		return nil, fmt.Errorf("%s/%s: %w", where, WeightsFile, err)
	}
	ck := &Checkpoint{Model: m, Tokenizer: tok, Meta: meta}
	ob, err := get(OptimizerFile)
	if errors.Is(err, errMissing) {
		return ck, nil
	}
	if err != nil {
		return nil, err
	}
	ot, om, err := ReadSafetensors(ob)
	if err == nil {
		ck.Optimizer, err = restoreAdam(m, ot, om)
	}
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", where, OptimizerFile, err)
	}
	return ck, nil
}

// SaveDir writes the checkpoint's files into dir (created if needed).
func (c *Checkpoint) SaveDir(dir string) error {
	files, err := c.files()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if _, ok := files[OptimizerFile]; !ok {
		// A stale optimizer from an earlier save would be restored with
		// these weights.
		if err := os.Remove(filepath.Join(dir, OptimizerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	for name, b := range files {
		// Write then rename, so a reader never sees half a file.
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	return nil
}

// LoadDir reads a checkpoint written by SaveDir.
func LoadDir(dir string) (*Checkpoint, error) {
	return parseCheckpoint(dir, func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) && name == OptimizerFile {
			return nil, errMissing
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		return b, nil
	})
}

// Save puts the checkpoint's files under prefix (keys prefix/config.json,
// prefix/tokenizer.json, prefix/optimizer.safetensors when there is an
// optimizer, prefix/model.safetensors). The weights go last, so their
// presence marks a complete checkpoint.
func (c *Checkpoint) Save(ctx context.Context, st store.ObjectStore, prefix string) error {
	files, err := c.files()
	if err != nil {
		return err
	}
	if _, ok := files[OptimizerFile]; !ok {
		key := path.Join(prefix, OptimizerFile)
		if err := st.Delete(ctx, key); err != nil {
			return fmt.Errorf("checkpoint: delete stale %s: %w", key, err)
		}
	}
	for _, name := range []string{ConfigFile, TokenizerFile, OptimizerFile, WeightsFile} {
		b, ok := files[name]
		if !ok {
			continue
		}
		key := path.Join(prefix, name)
		ct := "application/json"
		if name == WeightsFile {
			ct = "application/octet-stream"
		}
		if _, err := st.Put(ctx, key, bytes.NewReader(b), int64(len(b)), store.PutOptions{ContentType: ct}); err != nil {
			return fmt.Errorf("checkpoint: put %s: %w", key, err)
		}
	}
	return nil
}

// Load reads a checkpoint saved under prefix.
func Load(ctx context.Context, st store.ObjectStore, prefix string) (*Checkpoint, error) {
	return parseCheckpoint(prefix, func(name string) ([]byte, error) {
		key := path.Join(prefix, name)
		r, _, err := st.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) && name == OptimizerFile {
			return nil, errMissing
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint: get %s: %w", key, err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: read %s: %w", key, err)
		}
		return b, nil
	})
}
