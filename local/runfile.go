package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/t1pipe/t1/store"
)

// WriteRunFile stores data at key, an object of run directly under
// runs/<run>/, and writes the same file as <dir>/<base of key>, dir
// defaulting to <data>/runs/<run>, so that what a command made of a run
// (a report, an ablation's comparison) opens from the data directory as
// well as from the store; it returns the file's path.
func (in *Infra) WriteRunFile(ctx context.Context, run, dir, key, contentType string, data []byte) (string, error) {
	if _, err := in.Store.Put(ctx, key, bytes.NewReader(data), int64(len(data)), store.PutOptions{ContentType: contentType}); err != nil {
		return "", fmt.Errorf("store %s: %w", key, err)
	}
	if dir == "" {
		dir = filepath.Join(in.DataDir, "runs", run)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	file := filepath.Join(dir, path.Base(key))
	return file, os.WriteFile(file, data, 0o644)
}
