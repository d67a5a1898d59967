package sandbox

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// MarkedXattr, on a layer's root directory, says that every opaque
// directory of the layer also carries UserOpaqueXattr: what a caller that
// is not root, and cannot read trusted.* attributes, needs to copy the
// layer faithfully. Package image sets both when it makes a layer.
const (
	MarkedXattr     = "user.t1.opaque-marked"
	UserOpaqueXattr = "user.overlay.opaque"
	trustedOpaque   = "trusted.overlay.opaque"
)

// copyImage makes dst (an empty directory) the image's root filesystem
// by copying its layers, lowest first, applying their whiteouts and
// opaque directories as overlayfs would: the fallback where no overlay of
// idmapped layers can be mounted. Files belong to uid:gid (the sandbox's
// host uid, root inside) or, with uid < 0, to the caller, which bwrap
// maps to root inside. Set-id bits are dropped, as the overlay's nosuid
// mount ignores them. Nothing in dst is followed through a link.
func copyImage(layers []string, dst *safeRoot, uid, gid int) error {
	root := os.Geteuid() == 0
	for _, l := range layers {
		if !root {
			if v, err := getxattr(l, MarkedXattr); err != nil || v != "1" {
				return fmt.Errorf("sandbox: copying the image as uid %d: layer %s carries no user-readable opaque marks (%s), so its opaque directories cannot be told apart; rebuild it as root with this version", os.Geteuid(), l, MarkedXattr)
			}
		}
		if err := copyLayer(l, dst, uid, gid, root); err != nil {
			return fmt.Errorf("sandbox: copying the image: %w", err)
		}
	}
	return nil
}

func copyLayer(layer string, dst *safeRoot, uid, gid int, root bool) error {
	return filepath.WalkDir(layer, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(layer, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		cur, lerr := dst.Lstat(rel)
		exists := lerr == nil
		switch m := fi.Mode(); {
		case m&fs.ModeCharDevice != 0 && fi.Sys().(*syscall.Stat_t).Rdev == 0:
			// A whiteout: what the layers below have here is gone.
			if exists {
				return dst.RemoveAll(rel)
			}
			return nil
		case m.IsDir():
			if rel != "." && exists && (!cur.IsDir() || opaque(p)) {
				if err := dst.RemoveAll(rel); err != nil {
					return err
				}
				exists = false
			}
			if !exists {
				if err := dst.Mkdir(rel, 0o700); err != nil {
					return err
				}
			}
			perm := m & (fs.ModePerm | fs.ModeSticky)
			if !root {
				// The caller must be able to remove the copy again.
				perm |= 0o700
			}
			if err := dst.Chmod(rel, perm); err != nil {
				return err
			}
		case m.IsRegular():
			if exists {
				if err := dst.RemoveAll(rel); err != nil {
					return err
				}
			}
			if err := copyFile(p, dst, rel, m.Perm()); err != nil {
				return err
			}
		case m&fs.ModeSymlink != 0:
			if exists {
				if err := dst.RemoveAll(rel); err != nil {
					return err
				}
			}
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := dst.Symlink(t, rel); err != nil {
				return err
			}
		default:
			return nil // fifos, sockets, devices: bwrap makes /dev
		}
		if uid >= 0 {
			return dst.Lchown(rel, uid, gid)
		}
		return nil
	})
}

func copyFile(src string, dst *safeRoot, rel string, perm fs.FileMode) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := dst.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	return dst.Chmod(rel, perm)
}

// opaque reports whether the layer directory p hides the layers below:
// trusted.overlay.opaque as the overlay reads it, or its user-readable
// copy.
func opaque(p string) bool {
	for _, a := range []string{trustedOpaque, UserOpaqueXattr} {
		if v, err := getxattr(p, a); err == nil && v == "y" {
			return true
		}
	}
	return false
}

func getxattr(p, attr string) (string, error) {
	b := make([]byte, 16)
	n, err := unix.Lgetxattr(p, attr, b)
	if err != nil {
		return "", err
	}
	return string(b[:n]), nil
}
