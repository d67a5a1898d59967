package inference

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/store"
)

// Backends.
const (
	BackendReference = "reference"
	BackendSGLang    = "sglang"
	BackendVLLM      = "vllm"
)

// Options select and configure a backend (the inference section of
// pipeline.yaml in Go form).
type Options struct {
	Backend string
	URL     string
	// URLs, in place of URL, are several servers of one model (Pool).
	URLs        []string
	ServedModel string
	Timeout     time.Duration
	// LoadTimeout (sglang, vllm) bounds one weight load.
	LoadTimeout time.Duration
	// VLLMLogprobsMode is the vLLM server's --logprobs-mode
	// (VLLMOptions.LogprobsMode).
	VLLMLogprobsMode string
	// Checkpoint (reference): a local directory, else a key prefix in the
	// object store; empty means a fresh model of shape Model with the
	// default tokenizer.
	Checkpoint string
	// Precision (reference): bf16 or f32.
	Precision string
	// Model is the reference shape; its Layers and TopK reshape routing
	// from remote servers.
	Model moe.Config
	// Version (reference) overrides the weight version reported.
	Version string
}

// Open builds the configured engine. st may be nil unless the reference
// checkpoint lives in the object store.
func Open(ctx context.Context, o Options, st store.ObjectStore) (Engine, error) {
	switch o.Backend {
	case BackendReference:
		return OpenReference(ctx, o, st)
	case BackendSGLang:
		return NewSGLang(SGLangOptions{URL: o.URL, Timeout: o.Timeout, LoadTimeout: o.LoadTimeout, Layers: o.Model.Layers, TopK: o.Model.TopK, Client: &http.Client{}})
	case BackendVLLM:
		return NewVLLM(VLLMOptions{URL: o.URL, Model: o.ServedModel, Timeout: o.Timeout, LoadTimeout: o.LoadTimeout, LogprobsMode: o.VLLMLogprobsMode,
			Layers: o.Model.Layers, TopK: o.Model.TopK})
	}
	return nil, fmt.Errorf("inference: unknown backend %q (want reference, sglang or vllm)", o.Backend)
}

// Endpoints are the servers of o: URLs, else URL.
func (o Options) Endpoints() []string {
	if len(o.URLs) > 0 {
		return o.URLs
	}
	if o.URL != "" {
		return []string{o.URL}
	}
	return nil
}

// OpenPool opens a client of every server of o (sglang or vllm) as one
// Pool.
func OpenPool(ctx context.Context, o Options) (*Pool, error) {
	urls := o.Endpoints()
	if len(urls) == 0 {
		return nil, fmt.Errorf("inference: the %s backend needs a url", o.Backend)
	}
	var engines []WeightLoader
	for _, u := range urls {
		one := o
		one.URL, one.URLs = u, nil
		eng, err := Open(ctx, one, nil)
		if err != nil {
			return nil, err
		}
		wl, ok := eng.(WeightLoader)
		if !ok {
			return nil, fmt.Errorf("inference: the %s client cannot load new weights", o.Backend)
		}
		engines = append(engines, wl)
	}
	return NewPool(engines, urls), nil
}

// OpenReference loads (or initialises) the reference policy. The weight
// version is o.Version, else the checkpoint's policy_version metadata,
// else "0".
func OpenReference(ctx context.Context, o Options, st store.ObjectStore) (*Reference, error) {
	prec, err := moe.ParsePrecision(o.Precision)
	if err != nil {
		return nil, fmt.Errorf("inference: %w", err)
	}
	ck, err := LoadCheckpoint(ctx, o.Checkpoint, o.Model, st)
	if err != nil {
		return nil, err
	}
	version := o.Version
	if version == "" {
		version = ck.Meta["policy_version"]
	}
	if version == "" {
		version = "0"
	}
	return NewReference(ck.Model, ck.Tokenizer, prec, version), nil
}

// LoadCheckpoint reads ref as a local checkpoint directory when one exists
// there, else as an object-store key prefix; an empty ref initialises a
// model of shape cfg with the default tokenizer.
func LoadCheckpoint(ctx context.Context, ref string, cfg moe.Config, st store.ObjectStore) (*moe.Checkpoint, error) {
	if ref == "" {
		tok, err := moe.DefaultTokenizer()
		if err != nil {
			return nil, err
		}
		if tok.VocabSize() > cfg.Vocab {
			return nil, fmt.Errorf("inference: model vocab %d is smaller than the default tokenizer's %d ids", cfg.Vocab, tok.VocabSize())
		}
		m, err := moe.NewModel(cfg)
		if err != nil {
			return nil, fmt.Errorf("inference: %w", err)
		}
		return &moe.Checkpoint{Model: m, Tokenizer: tok}, nil
	}
	var ck *moe.Checkpoint
	var err error
	if fi, serr := os.Stat(filepath.Join(ref, moe.ConfigFile)); serr == nil && !fi.IsDir() {
		ck, err = moe.LoadDir(ref)
	} else if st == nil {
		return nil, fmt.Errorf("inference: checkpoint %q is not a local directory holding %s, and no object store is open", ref, moe.ConfigFile)
	} else if ck, err = moe.Load(ctx, st, ref); errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("inference: checkpoint %q is neither a local directory nor an object-store prefix: %w", ref, err)
	}
	if err != nil {
		return nil, err
	}
	if ck.Model.Head != moe.LMHead {
		return nil, fmt.Errorf("inference: checkpoint %q is a critic (%s); an engine serves a policy (%s)", ref, moe.CriticArchitecture, moe.Architecture)
	}
	return ck, nil
}

// IsLocalCheckpoint reports whether ref names a local checkpoint directory
// (or is empty), so no object store is needed to load it.
func IsLocalCheckpoint(ref string) bool {
	if ref == "" {
		return true
	}
	fi, err := os.Stat(filepath.Join(ref, moe.ConfigFile))
	return err == nil && !fi.IsDir()
}
