package image

import (
	"context"
	"os"
	"path/filepath"

	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/infra/sandbox"
)

// Backend starts every sandbox on the image of its task: the image is
// built (or found in the cache) from the task's environment/Dockerfile
// before Inner starts the sandbox on it. A task without a Dockerfile
// runs on the bare Debian base, its setup.sh (if any) inside the sandbox
// as usual. A Spec.Verifier sandbox gets the verifier's layer on top
// (Verifier). Build failures fail Start with the build's one-line error.
type Backend struct {
	Inner   sandbox.Backend
	Options Options
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return b.Inner.Name() }

// Isolates implements sandbox.Backend.
func (b *Backend) Isolates() bool { return b.Inner.Isolates() }

// Start implements sandbox.Backend.
func (b *Backend) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if spec.Image == nil {
		task := spec.TaskDir
		var res *Result
		var err error
		if task == "" || !hasDockerfile(task) {
			// The base alone: an empty task directory of a Dockerfile
			// that is just FROM.
			res, err = b.base(ctx)
		} else {
			res, err = Build(ctx, task, b.Options)
			spec.TaskDir = ""
		}
		if err == nil && spec.Verifier && task != "" {
			res, err = Verifier(ctx, task, res, b.Options)
		}
		if err != nil {
			return nil, err
		}
		spec.Image = res.Image
	}
	return b.Inner.Start(ctx, spec)
}

func hasDockerfile(task string) bool {
	fi, err := os.Lstat(filepath.Join(task, "environment", "Dockerfile"))
	return err == nil && fi.Mode().IsRegular()
}

// base builds the image of a Dockerfile that is only FROM debian.
func (b *Backend) base(ctx context.Context) (*Result, error) {
	dir, release, err := hostres.MkdirTemp("", "t1-image-base-", "image base build context")
	if err != nil {
		return nil, err
	}
	defer release()
	if err := os.Mkdir(filepath.Join(dir, "environment"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "environment", "Dockerfile"), []byte("FROM debian\n"), 0o644); err != nil {
		return nil, err
	}
	return Build(ctx, dir, b.Options)
}
