package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// Upload implements Sandbox. Files are written through an os.Root on the
// sandbox's directories, so a symbolic link planted by the sandbox cannot
// redirect the write to a host path.
func (b *box) Upload(ctx context.Context, src, dst string) error {
	if b.isClosed() {
		return ErrClosed
	}
	rel, err := b.rel(dst)
	if err != nil {
		return err
	}
	if _, top := topDir(rel); top {
		// A writable directory is a mount point: replace its contents.
		if err := b.clearDir(rel); err != nil {
			return err
		}
	} else if err := b.fsRoot.RemoveAll(rel); err != nil {
		return fmt.Errorf("sandbox: upload to %s: %w", dst, err)
	}
	if err := b.ensureParent(rel); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("sandbox: upload %s: %w", src, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		r, _ := filepath.Rel(src, p)
		name := path.Join(rel, filepath.ToSlash(r))
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("sandbox: upload %s: %w", p, err)
		}
		switch {
		case info.IsDir():
			if name == rel && isTop(rel) {
				return nil // a mount point keeps its owner and mode
			}
			if err := b.fsRoot.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("sandbox: upload %s: %w", p, err)
			}
			if err := b.chown(name); err != nil {
				return fmt.Errorf("sandbox: upload %s: %w", p, err)
			}
			return b.fsRoot.Chmod(name, b.restoreMode(info.Mode().Perm()|info.Mode()&(fs.ModeSticky|fs.ModeSetgid)))
		case info.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("sandbox: upload %s: %w", p, err)
			}
			if err := b.fsRoot.Symlink(t, name); err != nil {
				return fmt.Errorf("sandbox: upload %s: %w", p, err)
			}
			return b.chown(name)
		case info.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return fmt.Errorf("sandbox: upload %s: %w", p, err)
			}
			defer f.Close()
			return b.writeFile(name, f, b.restoreMode(info.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)), info.ModTime())
		default:
			return fmt.Errorf("sandbox: upload %s: not a regular file, directory or symbolic link", p)
		}
	})
}

func isTop(rel string) bool {
	_, top := topDir(rel)
	return top
}

// Download implements Sandbox. Reads go through an os.Root, so a symbolic
// link in the sandbox cannot make the host read one of its own files.
func (b *box) Download(ctx context.Context, src, dst string) error {
	if b.isClosed() {
		return ErrClosed
	}
	rel, err := b.rel(src)
	if err != nil {
		return err
	}
	return b.download(ctx, rel, dst)
}

func (b *box) download(ctx context.Context, rel, dst string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	info, err := b.fsRoot.Lstat(rel)
	if err != nil {
		return fmt.Errorf("sandbox: download /%s: %w", rel, err)
	}
	switch {
	case info.IsDir():
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("sandbox: download /%s: %w", rel, err)
		}
		f, err := b.fsRoot.Open(rel)
		if err != nil {
			return fmt.Errorf("sandbox: download /%s: %w", rel, err)
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return fmt.Errorf("sandbox: download /%s: %w", rel, err)
		}
		for _, n := range names {
			if err := b.download(ctx, path.Join(rel, n), filepath.Join(dst, n)); err != nil {
				return err
			}
		}
		return os.Chmod(dst, info.Mode().Perm())
	case info.Mode()&fs.ModeSymlink != 0:
		t, err := b.fsRoot.Readlink(rel)
		if err != nil {
			return fmt.Errorf("sandbox: download /%s: %w", rel, err)
		}
		_ = os.Remove(dst)
		return os.Symlink(t, dst)
	case info.Mode().IsRegular():
		in, err := b.fsRoot.Open(rel)
		if err != nil {
			return fmt.Errorf("sandbox: download /%s: %w", rel, err)
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return fmt.Errorf("sandbox: download /%s: %w", rel, err)
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return fmt.Errorf("sandbox: download /%s: %w", rel, err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("sandbox: download /%s: %w", rel, err)
		}
		return os.Chtimes(dst, info.ModTime(), info.ModTime())
	}
	return nil // sockets and fifos are not copied
}
