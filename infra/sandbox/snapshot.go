package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/t1pipe/t1/infra/hostres"
)

// whiteoutPrefix marks a deletion in a layer, as in OCI image layers.
const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
)

// entry is what the baseline remembers of one path. ctime is the change
// detector: the kernel updates it on every write, chmod, rename or link,
// and a sandbox cannot set it back.
type entry struct {
	mode   fs.FileMode // type and permission bits
	size   int64
	mtime  time.Time
	ctime  int64 // nanoseconds
	ino    uint64
	target string // symlink target
	// uid and gid are the host's owner of the path: chown changes them,
	// and on a directory nothing else the scan compares.
	uid, gid int
}

// manifest maps paths relative to the fs directory ("app/x") to entries.
type manifest map[string]entry

// scan records every path under the writable directories.
func (b *box) scan() (manifest, error) {
	m := manifest{}
	for _, d := range writableDirs {
		top := filepath.Join(b.fsDir, d)
		err := filepath.WalkDir(top, func(p string, de fs.DirEntry, err error) error {
			if len(p) >= maxPath || errors.Is(err, syscall.ENAMETOOLONG) {
				return fmt.Errorf("%w: a path is longer than %d bytes (PATH_MAX)", ErrLayerLimit, maxPath)
			}
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			info, err := de.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			rel, _ := filepath.Rel(b.fsDir, p)
			rel = filepath.ToSlash(rel)
			e := entry{mode: info.Mode(), size: info.Size(), mtime: info.ModTime()}
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				e.ctime = st.Ctim.Nano()
				e.ino = st.Ino
				e.uid, e.gid = int(st.Uid), int(st.Gid)
			}
			if info.Mode()&fs.ModeSymlink != 0 {
				if e.target, err = os.Readlink(p); err != nil {
					return err
				}
			}
			m[rel] = e
			return nil
		})
		if err != nil {
			if errors.Is(err, ErrLayerLimit) {
				return nil, err
			}
			return nil, fmt.Errorf("sandbox: scanning %s: %w", d, err)
		}
	}
	return m, nil
}

// archivable says whether a layer can carry this kind of file; sockets,
// fifos and devices are left out.
func archivable(m fs.FileMode) bool {
	return m.IsRegular() || m.IsDir() || m&fs.ModeSymlink != 0
}

// changed says whether cur must be written to the layer given the
// baseline entry base (ok: the path existed).
func changed(cur, base entry, ok bool) bool {
	if !ok || cur.mode != base.mode || cur.uid != base.uid || cur.gid != base.gid {
		return true
	}
	switch {
	case cur.mode.IsDir():
		return false
	case cur.mode&fs.ModeSymlink != 0:
		return cur.target != base.target
	default:
		return cur.ino != base.ino || cur.size != base.size || !cur.mtime.Equal(base.mtime) || cur.ctime != base.ctime
	}
}

// unixMode converts Go's mode bits to the tar header's.
func unixMode(m fs.FileMode) int64 {
	v := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// goMode converts a tar header's mode bits to Go's permission bits.
func goMode(v int64) fs.FileMode {
	m := fs.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// Snapshot implements Sandbox.
func (b *box) Snapshot(ctx context.Context, w io.Writer) error {
	if b.isClosed() {
		return ErrClosed
	}
	cur, err := b.scan()
	if err != nil {
		return err
	}
	hostres.Point("sandbox.snapshot")
	var items []snapItem
	for p, e := range cur {
		if !archivable(e.mode) {
			continue
		}
		base, ok := b.base[p]
		if changed(e, base, ok) {
			items = append(items, snapItem{name: p, src: p, e: e})
		}
	}
	for p, e := range b.base {
		if _, ok := cur[p]; ok {
			continue
		}
		// A deleted directory's children need no whiteouts of their own.
		if pe, ok := cur[path.Dir(p)]; !ok || !pe.mode.IsDir() {
			continue
		}
		if !archivable(e.mode) {
			continue
		}
		items = append(items, snapItem{name: p, whiteout: true})
	}
	root, err := b.rootItems()
	if err != nil {
		return err
	}
	items = append(items, root...)
	sort.Slice(items, func(i, j int) bool { return items[i].key() < items[j].key() })

	lw := &layerWriter{w: w, limit: b.limits.MaxLayer()}
	tw := tar.NewWriter(lw)
	var logical int64
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return err
		}
		if it.whiteout || it.opaque {
			name := path.Join(path.Dir(it.name), whiteoutPrefix+path.Base(it.name))
			if it.opaque {
				name = path.Join(it.name, opaqueWhiteout)
			}
			hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Format: tar.FormatPAX}
			if err := tw.WriteHeader(hdr); err != nil {
				return fmt.Errorf("sandbox: snapshot: %w", err)
			}
			continue
		}
		n, err := b.writeEntry(tw, lw, it.src, it.name, it.e)
		if err != nil {
			return err
		}
		if logical += n; logical > b.limits.MaxLogical() {
			return fmt.Errorf("%w: its files add up to more than %s with holes filled in", ErrLayerLimit, FormatSize(b.limits.MaxLogical()))
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("sandbox: snapshot: %w", err)
	}
	return nil
}

// snapItem is one entry of a layer: name is what the layer calls it,
// src where fsRoot has it.
type snapItem struct {
	name, src        string
	e                entry
	whiteout, opaque bool
}

// key orders a layer's entries: by name, parents before children, and a
// directory's opaque mark right after the directory, before anything
// inside it.
func (it snapItem) key() string {
	if it.opaque {
		return it.name + "/\x00"
	}
	return it.name
}

// maxPath is the longest host path the snapshot reads (PATH_MAX).
const maxPath = 4096

// ErrLayerLimit is what Snapshot wraps when the sandbox's state is too
// large for a layer (Limits.MaxLayer, Limits.MaxLogical, maxPath): the
// sandbox's own doing, not worth retrying.
var ErrLayerLimit = errors.New("sandbox: the sandbox's changes do not fit a snapshot layer")

// layerWriter counts what a layer has written and refuses to write past
// its limit.
type layerWriter struct {
	w     io.Writer
	n     int64
	limit int64
}

func (l *layerWriter) Write(p []byte) (int, error) {
	if l.n+int64(len(p)) > l.limit {
		return 0, fmt.Errorf("%w: over %s", ErrLayerLimit, FormatSize(l.limit))
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}

// topDir says whether p's parent is above the writable directories (p is
// one of them, or fs/var for var/tmp).
func topDir(p string) (string, bool) {
	for _, d := range writableDirs {
		if "/"+p == d {
			return d, true
		}
	}
	return "", false
}

// writeEntry writes one changed path and returns the logical size of
// what it stored (a regular file's length, holes included).
func (b *box) writeEntry(tw *tar.Writer, lw *layerWriter, src, name string, e entry) (int64, error) {
	hdr := &tar.Header{
		Name:    name,
		Mode:    unixMode(e.mode),
		ModTime: e.mtime,
		Uid:     inside(e.uid, b.uid, b.ids),
		Gid:     inside(e.gid, b.gid, b.ids),
		Format:  tar.FormatPAX,
	}
	switch {
	case e.mode.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return 0, tw.WriteHeader(hdr)
	case e.mode&fs.ModeSymlink != 0:
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = e.target
		return 0, tw.WriteHeader(hdr)
	}
	// Non-blocking and without following links: a process may have put a
	// fifo (whose open would wait for a writer forever) or a link where
	// the scan saw a regular file. What is not a regular file now is left
	// out, as fifos are.
	f, err := b.fsRoot.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENXIO) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sandbox: snapshot %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("sandbox: snapshot %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, nil
	}
	hdr.Typeflag = tar.TypeReg
	hdr.Size = fi.Size()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 < hdr.Size {
		if segs, ok := dataSegments(f, hdr.Size); ok {
			return hdr.Size, writeSparse(tw, lw, f, hdr, segs)
		}
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return 0, fmt.Errorf("sandbox: snapshot %s: %w", name, err)
	}
	n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
	if err == nil && n < hdr.Size {
		err = fmt.Errorf("file shrank from %d to %d bytes while being read", hdr.Size, n)
	}
	if err != nil {
		return 0, fmt.Errorf("sandbox: snapshot %s: %w", name, err)
	}
	return hdr.Size, nil
}

// checkName validates a layer entry's name: relative, clean, inside a
// writable directory.
func checkName(name string) (string, error) {
	n := strings.TrimSuffix(name, "/")
	if n == "" || strings.HasPrefix(n, "/") || path.Clean(n) != n || n == ".." || strings.HasPrefix(n, "../") {
		return "", fmt.Errorf("sandbox: restore: entry %q: not a clean relative path", name)
	}
	for _, d := range writableDirs {
		if "/"+n == d || strings.HasPrefix("/"+n, d+"/") {
			return n, nil
		}
	}
	return "", fmt.Errorf("sandbox: restore: entry %q: outside the writable directories (%s)", name, strings.Join(writableDirs, ", "))
}

// layerName validates a layer entry's name: clean and relative, inside
// a writable directory, or (root) anywhere else on an image root.
func (b *box) layerName(name string) (string, bool, error) {
	n, err := checkName(name)
	if err == nil || b.image == nil {
		return n, false, err
	}
	n = strings.TrimSuffix(name, "/")
	if n == "" || strings.HasPrefix(n, "/") || path.Clean(n) != n || n == ".." || strings.HasPrefix(n, "../") {
		return "", false, fmt.Errorf("sandbox: restore: entry %q: not a clean relative path", name)
	}
	return n, true, nil
}

// restoreMode drops setuid and setgid when the file would belong to the
// host's root.
func (b *box) restoreMode(m fs.FileMode) fs.FileMode {
	if b.uid < 0 && os.Geteuid() == 0 {
		m &^= fs.ModeSetuid | fs.ModeSetgid
	}
	return m
}

func (b *box) chown(name string) error { return b.chownAs(name, 0, 0) }

// chownAs gives name to the sandbox's ids uid and gid: the host ids of
// the sandbox's block, root's (the block's first) for an id the block
// does not have.
func (b *box) chownAs(name string, uid, gid int) error {
	if b.uid < 0 {
		return nil
	}
	return b.fsRoot.Lchown(name, outside(uid, b.uid, b.ids), outside(gid, b.gid, b.ids))
}

// inside is the sandbox's id for the host id h of a sandbox whose ids
// are the n host ids from base on: a layer records owners as the
// sandbox sees them, so that another sandbox's block restores them. An
// id of no block (or of a sandbox of one id) is root's, 0.
func inside(h, base, n int) int {
	if base < 0 || h < base || h-base >= n {
		return 0
	}
	return h - base
}

// outside is the host id of the sandbox's id i: root's for an id the
// sandbox does not have.
func outside(i, base, n int) int {
	if i < 0 || i >= n {
		return base
	}
	return base + i
}

// Restore implements Sandbox.
func (b *box) Restore(ctx context.Context, r io.Reader) error {
	if b.isClosed() {
		return ErrClosed
	}
	tr := tar.NewReader(r)
	type dirMeta struct {
		t     *box
		name  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []dirMeta
	var data, logical int64 // what the layer's files allocate, and their lengths
	var rb *box             // the image root, for entries outside the writable directories
	var guard *rootGuard
	defer func() {
		if guard != nil {
			b.noteSkipped(guard.skipped, guard.refused)
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("sandbox: restore: %w", err)
		}
		name, root, err := b.layerName(hdr.Name)
		if err != nil {
			return err
		}
		base := path.Base(name)
		dir := path.Dir(name)
		t := b
		if root {
			if rb == nil {
				if rb, guard, err = b.rootTarget(); err != nil {
					return err
				}
				defer rb.fsRoot.Close()
			}
			t = rb
			var v rootVerdict
			switch {
			case base == opaqueWhiteout:
				v = guard.admitRemoval(name, dir, true)
			case strings.HasPrefix(base, whiteoutPrefix):
				if w := strings.TrimPrefix(base, whiteoutPrefix); w == "" || w == "." || w == ".." {
					return fmt.Errorf("sandbox: restore: entry %q: a whiteout that names no file", hdr.Name)
				}
				v = guard.admitRemoval(name, path.Join(dir, strings.TrimPrefix(base, whiteoutPrefix)), false)
			default:
				v = guard.admit(name, hdr.Typeflag, goMode(hdr.Mode))
			}
			if v != rootApply {
				continue
			}
		}
		if strings.HasPrefix(base, whiteoutPrefix) {
			if base == opaqueWhiteout {
				if err := t.clearDir(dir); err != nil {
					return err
				}
				continue
			}
			target := path.Join(dir, strings.TrimPrefix(base, whiteoutPrefix))
			if !root {
				if _, err := checkName(target); err != nil {
					return err
				}
				if _, top := topDir(target); top {
					return fmt.Errorf("sandbox: restore: entry %q deletes a writable directory itself", hdr.Name)
				}
			}
			if err := t.fsRoot.RemoveAll(target); err != nil {
				return fmt.Errorf("sandbox: restore: %s: %w", hdr.Name, err)
			}
			continue
		}
		if err := t.ensureParent(name); err != nil {
			return err
		}
		existing, lerr := t.fsRoot.Lstat(name)
		mode := b.restoreMode(goMode(hdr.Mode))
		var src io.Reader = tr
		if root && base == "entry_points.txt" && hdr.Typeflag == tar.TypeReg {
			data, ok := readEntryPoints(tr, hdr.Size)
			if !ok || pytestPlugin(data) {
				guard.skip(name)
				continue
			}
			src = bytes.NewReader(data)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if lerr == nil && !existing.IsDir() {
				if err := t.fsRoot.RemoveAll(name); err != nil {
					return fmt.Errorf("sandbox: restore: %s: %w", name, err)
				}
				lerr = fs.ErrNotExist
			}
			if lerr != nil {
				if err := t.fsRoot.Mkdir(name, 0o700); err != nil {
					return fmt.Errorf("sandbox: restore: %s: %w", name, err)
				}
			}
			if err := t.chownAs(name, hdr.Uid, hdr.Gid); err != nil {
				return fmt.Errorf("sandbox: restore: %s: %w", name, err)
			}
			dirs = append(dirs, dirMeta{t, name, mode, hdr.ModTime})
		case tar.TypeReg:
			if lerr == nil && !existing.Mode().IsRegular() {
				if err := t.fsRoot.RemoveAll(name); err != nil {
					return fmt.Errorf("sandbox: restore: %s: %w", name, err)
				}
			}
			if logical += hdr.Size; logical > b.limits.MaxLogical() {
				return fmt.Errorf("sandbox: restore: %w: its files add up to more than %s with holes filled in", ErrLayerLimit, FormatSize(b.limits.MaxLogical()))
			}
			n, err := t.writeDataAs(name, src, mode, hdr.ModTime, hdr.Uid, hdr.Gid)
			if err != nil {
				return err
			}
			if data += n; data > b.limits.Disk {
				return fmt.Errorf("sandbox: restore: %w: its files hold more than the disk limit, %s", ErrLayerLimit, FormatSize(b.limits.Disk))
			}
		case tar.TypeSymlink:
			if lerr == nil {
				if err := t.fsRoot.RemoveAll(name); err != nil {
					return fmt.Errorf("sandbox: restore: %s: %w", name, err)
				}
			}
			if err := t.fsRoot.Symlink(hdr.Linkname, name); err != nil {
				return fmt.Errorf("sandbox: restore: %s: %w", name, err)
			}
			if err := t.chownAs(name, hdr.Uid, hdr.Gid); err != nil {
				return fmt.Errorf("sandbox: restore: %s: %w", name, err)
			}
		default:
			return fmt.Errorf("sandbox: restore: entry %q: unsupported type %q", hdr.Name, hdr.Typeflag)
		}
	}
	// Directory modes and times last: children were written into them, and
	// a read-only directory would refuse its children.
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		if err := d.t.fsRoot.Chmod(d.name, d.mode); err != nil {
			return fmt.Errorf("sandbox: restore: %s: %w", d.name, err)
		}
		if err := d.t.fsRoot.Chtimes(d.name, d.mtime, d.mtime); err != nil {
			return fmt.Errorf("sandbox: restore: %s: %w", d.name, err)
		}
	}
	return nil
}

// writeFile creates or replaces the regular file name with r's contents,
// leaving holes where r has blocks of zeros.
func (b *box) writeFile(name string, r io.Reader, mode fs.FileMode, mtime time.Time) error {
	_, err := b.writeData(name, r, mode, mtime)
	return err
}

// writeData is writeFile that returns the bytes it wrote (holes left out).
func (b *box) writeData(name string, r io.Reader, mode fs.FileMode, mtime time.Time) (int64, error) {
	return b.writeDataAs(name, r, mode, mtime, 0, 0)
}

// writeDataAs is writeData of a file that belongs to the sandbox's ids
// uid and gid.
func (b *box) writeDataAs(name string, r io.Reader, mode fs.FileMode, mtime time.Time, uid, gid int) (int64, error) {
	f, err := b.fsRoot.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, fmt.Errorf("sandbox: write %s: %w", name, err)
	}
	n, err := copyHoles(f, r)
	if err != nil {
		f.Close()
		return 0, fmt.Errorf("sandbox: write %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("sandbox: write %s: %w", name, err)
	}
	if err := b.chownAs(name, uid, gid); err != nil {
		return 0, fmt.Errorf("sandbox: write %s: %w", name, err)
	}
	// After chown, which clears setuid and setgid.
	if err := b.fsRoot.Chmod(name, mode); err != nil {
		return 0, fmt.Errorf("sandbox: write %s: %w", name, err)
	}
	if !mtime.IsZero() {
		if err := b.fsRoot.Chtimes(name, mtime, mtime); err != nil {
			return 0, fmt.Errorf("sandbox: write %s: %w", name, err)
		}
	}
	return n, nil
}

// ensureParent creates missing parent directories of name (mode 0755,
// owned by the sandbox user).
func (b *box) ensureParent(name string) error {
	dir := path.Dir(name)
	var missing []string
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		if fi, err := b.fsRoot.Lstat(d); err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("sandbox: %s: parent %s is not a directory", name, d)
			}
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sandbox: %s: %w", name, err)
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := b.fsRoot.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("sandbox: %s: %w", missing[i], err)
		}
		if err := b.chown(missing[i]); err != nil {
			return fmt.Errorf("sandbox: %s: %w", missing[i], err)
		}
	}
	return nil
}

// clearDir removes everything inside dir.
func (b *box) clearDir(dir string) error {
	f, err := b.fsRoot.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("sandbox: restore: %s: %w", dir, err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("sandbox: restore: %s: %w", dir, err)
	}
	for _, n := range names {
		if err := b.fsRoot.RemoveAll(path.Join(dir, n)); err != nil {
			return fmt.Errorf("sandbox: restore: %s: %w", dir, err)
		}
	}
	return nil
}

func (b *box) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}
