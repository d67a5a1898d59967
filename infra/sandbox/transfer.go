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

	"golang.org/x/sys/unix"
)

// Upload implements Sandbox. Files are written through the sandbox's
// safeRoot, so a symbolic link planted by the sandbox cannot redirect the
// write to a host path; links in src are copied as links.
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
	src = filepath.Clean(src)
	from, err := openSafeRoot(filepath.Dir(src))
	if err != nil {
		return fmt.Errorf("sandbox: upload %s: %w", src, err)
	}
	defer from.Close()
	return b.copyInto(ctx, from, filepath.Base(src), rel)
}

func isTop(rel string) bool {
	_, top := topDir(rel)
	return top
}

// copyInto merges name, a file or directory beneath the host root from,
// into rel: a directory's contents go into rel, a file becomes rel.
// Existing files are replaced, existing directories kept with their mode
// (a writable directory keeps its owner and mode). Links are copied as
// links; a link on the way to a source, or in the sandbox on the way to
// its destination, fails the copy instead of being followed.
func (b *box) copyInto(ctx context.Context, from *safeRoot, name, rel string) error {
	return from.walk(name, func(p string, info fs.FileInfo) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		sub := p
		if name != "." {
			sub = p[len(name):]
		}
		target := path.Join(rel, sub)
		fail := func(err error) error { return fmt.Errorf("sandbox: copy %s: %w", filepath.Join(from.Name(), p), err) }
		if err := b.ensureParent(target); err != nil {
			return err
		}
		existing, lerr := b.fsRoot.Lstat(target)
		if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
			return fail(lerr)
		}
		mode := b.restoreMode(info.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky))
		switch {
		case info.IsDir():
			if lerr == nil && existing.IsDir() {
				return nil
			}
			if lerr == nil {
				if err := b.fsRoot.RemoveAll(target); err != nil {
					return fail(err)
				}
			}
			if err := b.fsRoot.Mkdir(target, 0o700); err != nil {
				return fail(err)
			}
			if err := b.chown(target); err != nil {
				return fail(err)
			}
			return b.fsRoot.Chmod(target, mode&^fs.ModeSetuid)
		case info.Mode()&fs.ModeSymlink != 0:
			t, err := from.Readlink(p)
			if err != nil {
				return fail(err)
			}
			if lerr == nil {
				if err := b.fsRoot.RemoveAll(target); err != nil {
					return fail(err)
				}
			}
			if err := b.fsRoot.Symlink(t, target); err != nil {
				return fail(err)
			}
			return b.chown(target)
		case info.Mode().IsRegular():
			if lerr == nil && !existing.Mode().IsRegular() {
				if err := b.fsRoot.RemoveAll(target); err != nil {
					return fail(err)
				}
			}
			f, err := from.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
			if err != nil {
				return fail(err)
			}
			defer f.Close()
			if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
				return fail(errors.New("changed while being copied"))
			}
			return b.writeFile(target, f, mode, info.ModTime())
		}
		return fail(errors.New("not a regular file, directory or symbolic link"))
	})
}

// Download implements Sandbox. Neither side follows a link: the sandbox's
// files are read through its safeRoot, and dst is written through one on
// dst's parent, so a link in the sandbox is copied as a link, and one
// already at the destination is replaced, never written through.
func (b *box) Download(ctx context.Context, src, dst string) error {
	if b.isClosed() {
		return ErrClosed
	}
	rel, err := b.rel(src)
	if err != nil {
		return err
	}
	dst = filepath.Clean(dst)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("sandbox: download %s: %w", src, err)
	}
	to, err := openSafeRoot(filepath.Dir(dst))
	if err != nil {
		return fmt.Errorf("sandbox: download %s: %w", src, err)
	}
	defer to.Close()
	return b.download(ctx, rel, to, filepath.Base(dst))
}

func (b *box) download(ctx context.Context, rel string, to *safeRoot, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("sandbox: download /%s: %w", rel, err) }
	info, err := b.fsRoot.Lstat(rel)
	if err != nil {
		return fail(err)
	}
	existing, lerr := to.Lstat(name)
	if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
		return fail(lerr)
	}
	// Whatever is in the way and of another kind goes first.
	if lerr == nil && (existing.Mode().Type() != info.Mode().Type() || info.Mode()&fs.ModeSymlink != 0) {
		if err := to.RemoveAll(name); err != nil {
			return fail(err)
		}
		lerr = fs.ErrNotExist
	}
	switch {
	case info.IsDir():
		if lerr != nil {
			if err := to.Mkdir(name, 0o755); err != nil {
				return fail(err)
			}
		}
		d, err := b.fsRoot.OpenFile(rel, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return fail(err)
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil {
			return fail(err)
		}
		for _, n := range names {
			if err := b.download(ctx, path.Join(rel, n), to, path.Join(name, n)); err != nil {
				return err
			}
		}
		return to.Chmod(name, info.Mode().Perm())
	case info.Mode()&fs.ModeSymlink != 0:
		t, err := b.fsRoot.Readlink(rel)
		if err != nil {
			return fail(err)
		}
		return to.Symlink(t, name)
	case info.Mode().IsRegular():
		in, err := b.fsRoot.OpenFile(rel, os.O_RDONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return fail(err)
		}
		defer in.Close()
		out, err := to.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
		if err != nil {
			return fail(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return fail(err)
		}
		if err := out.Close(); err != nil {
			return fail(err)
		}
		return to.Chtimes(name, info.ModTime(), info.ModTime())
	}
	return nil // sockets and fifos are not copied
}
