package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/store"
)

// opaqueXattr marks an overlayfs directory that hides the layers below.
const opaqueXattr = "trusted.overlay.opaque"

// Push stores every layer of res's image not yet in st, as a tar in the
// OCI layer form (whiteouts as .wh.<name>, opaque directories as
// .wh..wh..opq), put-if-absent under keys.ImageLayer. It returns how
// many it stored.
func Push(ctx context.Context, st store.ObjectStore, res *Result) (int, error) {
	n := 0
	for i, k := range res.Keys {
		key := keys.ImageLayer(k)
		if _, err := st.Stat(ctx, key); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return n, err
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeLayer(pw, res.Image.Layers[i])) }()
		_, err := st.PutIfAbsent(ctx, key, pr, -1, store.PutOptions{ContentType: "application/x-tar"})
		pr.CloseWithError(err)
		if err != nil && !errors.Is(err, store.ErrExists) {
			return n, fmt.Errorf("image: pushing layer %s: %w", k, err)
		}
		if err == nil {
			n++
		}
	}
	return n, nil
}

// Pull fetches the layer key from st into the cache at cacheDir unless
// it is there already, and returns its directory.
func Pull(ctx context.Context, st store.ObjectStore, cacheDir, key string) (string, error) {
	c, err := openCache(cacheDir)
	if err != nil {
		return "", err
	}
	defer c.close()
	dir, _, err := c.get(key, func(upper, _, _ string) error {
		rc, _, err := st.Get(ctx, keys.ImageLayer(key))
		if err != nil {
			return err
		}
		defer rc.Close()
		return readLayer(rc, upper)
	})
	return dir, err
}

// writeLayer writes the layer directory dir as a tar, no link followed.
func writeLayer(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if fi.Mode()&fs.ModeCharDevice != 0 && st.Rdev == 0 {
			return tw.WriteHeader(&tar.Header{Name: path.Join(path.Dir(rel), ".wh."+path.Base(rel)), Typeflag: tar.TypeReg, Mode: 0o644})
		}
		if fi.Mode()&(fs.ModeDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			return nil // no layer t1 builds has them (the base's /dev is emptied)
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = rel, int(st.Uid), int(st.Gid), "", ""
		if fi.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.IsDir() {
			if v := make([]byte, 1); true {
				if n, err := unix.Lgetxattr(p, opaqueXattr, v); err == nil && n == 1 && v[0] == 'y' {
					return tw.WriteHeader(&tar.Header{Name: rel + "/.wh..wh..opq", Typeflag: tar.TypeReg, Mode: 0o644})
				}
			}
			return nil
		}
		if fi.Mode().IsRegular() {
			f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// readLayer unpacks a layer tar into the empty directory dir. Names
// must be clean and relative, and none may lie below a link the layer
// made: nothing is written outside dir.
func readLayer(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	links := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("image: layer: %w", err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("image: layer entry %q: not a clean relative name", hdr.Name)
		}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if links[d] {
				return fmt.Errorf("image: layer entry %q lies below the link %s", hdr.Name, d)
			}
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		base := path.Base(name)
		mode := uint32(hdr.Mode) & 0o7777
		switch {
		case base == ".wh..wh..opq":
			err = unix.Lsetxattr(filepath.Dir(p), opaqueXattr, []byte("y"), 0)
		case strings.HasPrefix(base, ".wh."):
			err = unix.Mknod(filepath.Join(filepath.Dir(p), strings.TrimPrefix(base, ".wh.")), unix.S_IFCHR, 0)
		case hdr.Typeflag == tar.TypeDir:
			if err = os.Mkdir(p, 0o700); errors.Is(err, fs.ErrExist) {
				err = nil
			}
		case hdr.Typeflag == tar.TypeSymlink:
			links[name] = true
			err = os.Symlink(hdr.Linkname, p)
		case hdr.Typeflag == tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600); err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err == nil {
					err = os.Chtimes(p, hdr.ModTime, hdr.ModTime)
				}
			}
		default:
			continue // devices, fifos: not in images t1 builds
		}
		if err == nil && !strings.HasPrefix(base, ".wh.") {
			err = unix.Lchown(p, hdr.Uid, hdr.Gid)
		}
		// After the owner: chown clears setuid and setgid.
		if err == nil && (hdr.Typeflag == tar.TypeDir || hdr.Typeflag == tar.TypeReg) && !strings.HasPrefix(base, ".wh.") {
			err = unix.Chmod(p, mode)
		}
		if err != nil {
			return fmt.Errorf("image: layer entry %s: %w", hdr.Name, err)
		}
	}
}
