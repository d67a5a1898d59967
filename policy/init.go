package policy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/infra/inference"
)

// InitHelp is the help text of `t1 moe init`.
const InitHelp = `init writes a freshly initialised Qwen3-MoE of the configuration's
inference.model shape (its seed included) with t1's default tokenizer to a
new checkpoint directory, in the Hugging Face layout transformers, SGLang and
vLLM load. It is the checkpoint a remote engine is started from when trying
the remote path on a CPU (t1 serve-policy --checkpoint DIR) and the run's
inference.checkpoint.`

// Initialized is the checkpoint Init wrote.
type Initialized struct {
	Checkpoint string `json:"checkpoint"`
}

// WriteText prints where the checkpoint is.
func (i Initialized) WriteText(w io.Writer) { fmt.Fprintf(w, "wrote %s\n", i.Checkpoint) }

// Init writes a fresh checkpoint of m's shape to dir, which must not exist
// or be empty: an existing checkpoint is never overwritten.
func Init(m config.InferenceModel, dir string) (Initialized, error) {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return Initialized{}, fmt.Errorf("%s is not empty: init writes a new checkpoint directory", dir)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return Initialized{}, err
	}
	ck, err := inference.LoadCheckpoint(context.Background(), "", m.Shape(), nil)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = ck.SaveDir(dir)
	}
	return Initialized{Checkpoint: dir}, err
}
