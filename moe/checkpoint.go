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

// Checkpoint is a model with the tokenizer it was trained with: t1's own
// (*Tokenizer) or a Hugging Face model's (*HFTokenizer, from LoadTokenizer
// or a loaded checkpoint).
type Checkpoint struct {
	Model     *Model
	Tokenizer tokenizer.Tokenizer
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
	cfg, err := MarshalConfig(c.Model.Cfg, c.Model.Head)
	if err != nil {
		return nil, err
	}
	files, err := tokenizerFiles(c.Tokenizer)
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
	files[ConfigFile], files[WeightsFile] = cfg, w.Bytes()
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

// errMissing marks an optional checkpoint file that is absent.
var errMissing = errors.New("optional file missing")

// optionalFiles are the checkpoint files that may be absent: the
// optimizer, a sharded model's index (when the weights are one file), and
// the tokenizer files of a Hugging Face model beside its tokenizer.json.
var optionalFiles = append([]string{OptimizerFile, WeightsIndexFile}, hfTokenizerFiles...)

// getter reads one checkpoint file; for an optional one it answers
// errMissing when the file is absent.
type getter func(name string, optional bool) ([]byte, error)

// parseCheckpoint builds a checkpoint from its files; where names the
// source in errors.
func parseCheckpoint(where string, get getter) (*Checkpoint, error) {
	cb, err := get(ConfigFile, false)
	if err != nil {
		return nil, err
	}
	cfg, head, err := ParseConfig(cb)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", where, ConfigFile, err)
	}
	tb, err := get(TokenizerFile, false)
	if err != nil {
		return nil, err
	}
	tf := map[string][]byte{TokenizerFile: tb}
	// t1's own tokenizer has nothing beside it; not asking spares a
	// store three lookups per load.
	if !ownFormat(tb) {
		for _, name := range hfTokenizerFiles {
			switch b, err := get(name, true); {
			case err == nil:
				tf[name] = b
			case !errors.Is(err, errMissing):
				return nil, err
			}
		}
	}
	tok, err := ReadTokenizer(tf)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", where, TokenizerFile, err)
	}
	if tok.VocabSize() > cfg.Vocab {
		return nil, fmt.Errorf("%s/%s: %d ids exceed the config's vocab %d", where, TokenizerFile, tok.VocabSize(), cfg.Vocab)
	}
	tensors, meta, err := readWeights(where, get)
	if err != nil {
		return nil, err
	}
	m := newModel(cfg, head)
	if err := loadTensors(m.W, tensors, cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	ck := &Checkpoint{Model: m, Tokenizer: tok, Meta: meta}
	ob, err := get(OptimizerFile, true)
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

// readWeights reads model.safetensors or, when there is none, the shards
// model.safetensors.index.json names (as transformers saves a large
// model), each tensor from the shard the index gives it. The metadata is the single file's, or the first
// shard's.
func readWeights(where string, get getter) (map[string]*Tensor, map[string]string, error) {
	wb, err := get(WeightsFile, true)
	if err == nil {
		tensors, meta, err := ReadSafetensors(wb)
		if err != nil {
			return nil, nil, fmt.Errorf("%s/%s: %w", where, WeightsFile, err)
		}
		return tensors, meta, nil
	}
	if !errors.Is(err, errMissing) {
		return nil, nil, err
	}
	ib, err := get(WeightsIndexFile, true)
	if errors.Is(err, errMissing) {
		return nil, nil, fmt.Errorf("%s: no weights: neither %s nor %s", where, WeightsFile, WeightsIndexFile)
	}
	if err != nil {
		return nil, nil, err
	}
	shards, err := WeightShards(ib)
	if err != nil {
		return nil, nil, fmt.Errorf("%s/%w", where, err)
	}
	var ix struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	_ = json.Unmarshal(ib, &ix) // WeightShards parsed it
	all := map[string]*Tensor{}
	var meta map[string]string
	for i, name := range shards {
		b, err := get(name, false)
		if err != nil {
			return nil, nil, err
		}
		ts, m, err := ReadSafetensors(b)
		if err != nil {
			return nil, nil, fmt.Errorf("%s/%s: %w", where, name, err)
		}
		if i == 0 {
			meta = m
		}
		for tn, t := range ts {
			if ix.WeightMap[tn] != name {
				return nil, nil, fmt.Errorf("%s/%s: tensor %q is not in this shard by %s (it names %q)", where, name, tn, WeightsIndexFile, ix.WeightMap[tn])
			}
			all[tn] = t
		}
	}
	for tn, shard := range ix.WeightMap {
		if all[tn] == nil {
			return nil, nil, fmt.Errorf("%s/%s: names tensor %q in %s, which does not hold it", where, WeightsIndexFile, tn, shard)
		}
	}
	return all, meta, nil
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
	for _, name := range optionalFiles {
		if _, ok := files[name]; ok {
			continue
		}
		// A stale optimizer (or chat template) from an earlier save would
		// be read with these weights.
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
	return parseCheckpoint(dir, func(name string, optional bool) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) && optional {
			return nil, errMissing
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		return b, nil
	})
}

// Save puts the checkpoint's files under prefix (keys prefix/config.json,
// prefix/tokenizer.json and a Hugging Face tokenizer's files beside it,
// prefix/optimizer.safetensors when there is an optimizer,
// prefix/model.safetensors). The weights go last, so their presence marks
// a complete checkpoint.
func (c *Checkpoint) Save(ctx context.Context, st store.ObjectStore, prefix string) error {
	files, err := c.files()
	if err != nil {
		return err
	}
	stale := []string{OptimizerFile}
	if _, hf := c.Tokenizer.(*HFTokenizer); hf {
		// t1's own tokenizer reads no file beside tokenizer.json, so only
		// a Hugging Face one could pick up another model's stale template.
		stale = optionalFiles
	}
	for _, name := range stale {
		if _, ok := files[name]; ok {
			continue
		}
		key := path.Join(prefix, name)
		if err := st.Delete(ctx, key); err != nil {
			return fmt.Errorf("checkpoint: delete stale %s: %w", key, err)
		}
	}
	order := append(append([]string{ConfigFile, TokenizerFile}, hfTokenizerFiles...), OptimizerFile, WeightsFile)
	for _, name := range order {
		b, ok := files[name]
		if !ok {
			continue
		}
		key := path.Join(prefix, name)
		ct := "application/json"
		if name == "chat_template.jinja" {
			ct = "text/plain"
		} else if name == WeightsFile {
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
	return parseCheckpoint(prefix, func(name string, optional bool) ([]byte, error) {
		key := path.Join(prefix, name)
		r, _, err := st.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) && optional {
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
