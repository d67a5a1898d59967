package harbor

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// BundleMediaType names the bundle format in events and object metadata.
const BundleMediaType = "application/x-harbor-task+tar+gzip"

// epoch is the modification time of every bundle entry.
var epoch = time.Unix(0, 0).UTC()

// Bundle writes the task as a deterministic tar.gz to w and returns the
// SHA-256 (hex) of the bytes written. Entries are sorted by path, parent
// directories get their own entries, times are the Unix epoch, owners are
// 0/0 without names, modes are 0644, 0755 or 0777 (links), and the gzip
// header carries no name or time: equal tasks give equal bundles.
func (t *Task) Bundle(w io.Writer) (string, error) {
	files, err := t.allFiles()
	if err != nil {
		return "", err
	}
	if _, err := FromFiles(t.Name, "task "+t.Name, files); err != nil {
		return "", err
	}
	h := sha256.New()
	out := io.MultiWriter(w, h)
	zw, err := gzip.NewWriterLevel(out, gzip.DefaultCompression)
	if err != nil {
		return "", err
	}
	// MTIME 0 is gzip's "no time"; this writer would store the zero
	// time.Time truncated to 32 bits instead. OS 255 is "unknown".
	zw.ModTime, zw.OS = epoch, 255
	tw := tar.NewWriter(zw)
	names := map[string]bool{}
	for p := range files {
		names[p] = false
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			names[d] = true
		}
	}
	order := make([]string, 0, len(names))
	for p := range names {
		order = append(order, p)
	}
	slices.Sort(order)
	for _, p := range order {
		hdr := &tar.Header{Name: p, ModTime: epoch, Format: tar.FormatPAX}
		f := files[p]
		switch {
		case names[p]:
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, p+"/", 0o755
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, normMode(f), int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", fmt.Errorf("bundle %s: %w", p, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return "", fmt.Errorf("bundle %s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// BundleBytes is Bundle into memory.
func (t *Task) BundleBytes() ([]byte, string, error) {
	var buf bytes.Buffer
	sum, err := t.Bundle(&buf)
	if err != nil {
		return nil, "", err
	}
	return buf.Bytes(), sum, nil
}

// ReadBundle reads a task bundle (tar, optionally gzip or zstd compressed)
// without touching the disk, with the checks of Extract and of Load.
func ReadBundle(r io.Reader, name string, lim Limits) (*Task, error) {
	origin := "bundle " + name
	files, _, err := readArchive(r, origin, lim)
	if err != nil {
		return nil, err
	}
	return FromFiles(name, origin, files)
}

// Extract unpacks an archive (tar, optionally gzip or zstd compressed) into
// dir, which must not exist or be empty. It refuses absolute paths, ".."
// traversal, entries below a link, links that resolve outside dir (through
// other links too), hard links, devices, FIFOs and any other special
// entry, and enforces lim; errors name the entry. Nothing is written until
// the whole archive has been read and checked; on a write error what was
// written is removed.
func Extract(r io.Reader, dir string, lim Limits) error {
	origin := "archive"
	files, dirs, err := readArchive(r, origin, lim)
	if err != nil {
		return err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("extract to %s: directory is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	fail := func(err error) error {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
		return fmt.Errorf("extract to %s: %w", dir, err)
	}
	ds := make([]string, 0, len(dirs))
	for d := range dirs {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	for _, d := range ds {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			return fail(err)
		}
	}
	// Links last, so that no file is ever written through one.
	var links []string
	for _, p := range sortedKeys(files) {
		if files[p].Link != "" {
			links = append(links, p)
			continue
		}
		if err := writeEntry(dir, p, files[p]); err != nil {
			return fail(err)
		}
	}
	for _, p := range links {
		if err := writeEntry(dir, p, files[p]); err != nil {
			return fail(err)
		}
	}
	return nil
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// readArchive reads every entry into memory, bounded by lim, and checks the
// tree as a whole (links can only be judged once every entry is known).
func readArchive(r io.Reader, origin string, lim Limits) (map[string]File, map[string]bool, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(4)
	var src io.Reader = br
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: gzip: %w", origin, err)
		}
		defer zr.Close()
		src = zr
	case bytes.HasPrefix(magic, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(lim.MaxTotalBytes)+1<<20))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: zstd: %w", origin, err)
		}
		defer zr.Close()
		src = zr
	}
	// Headers are not file bytes, and the tar reader folds any number of
	// PAX headers into the next entry, so the decompressed stream gets its
	// own bound (a bomb of repeated headers).
	budget := lim.MaxTotalBytes + int64(lim.MaxEntries)*8<<10 + 4<<20
	tr := tar.NewReader(&boundedReader{r: src, left: budget, origin: origin})
	files := map[string]File{}
	dirs := map[string]bool{}
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: entry %d: %w", origin, n+1, err)
		}
		if n >= lim.MaxEntries {
			return nil, nil, &Error{Task: origin, Path: quoteName(hdr.Name), Err: fmt.Errorf("%w: more than %d", ErrTooMany, lim.MaxEntries)}
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		if hdr.Typeflag == tar.TypeDir {
			name = strings.TrimSuffix(name, "/")
		}
		if name == "" || name == "." {
			continue
		}
		bad := func(err error) (map[string]File, map[string]bool, error) {
			return nil, nil, &Error{Task: origin, Path: quoteName(hdr.Name), Err: err}
		}
		if err := checkName(name); err != nil {
			return bad(err)
		}
		if _, dup := files[name]; dup || dirs[name] {
			return bad(ErrDuplicate)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			dirs[name] = true
		case tar.TypeSymlink:
			if hdr.Linkname == "" {
				return bad(fmt.Errorf("%w: link with an empty target", ErrUnsafe))
			}
			files[name] = File{Mode: 0o777, Link: hdr.Linkname}
		case tar.TypeReg, tar.TypeRegA:
			if hdr.Size > lim.MaxFileBytes {
				return bad(fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, hdr.Size, lim.MaxFileBytes))
			}
			if total += hdr.Size; total > lim.MaxTotalBytes {
				return bad(fmt.Errorf("%w: archive exceeds %d bytes in total", ErrTooLarge, lim.MaxTotalBytes))
			}
			data := make([]byte, hdr.Size)
			if _, err := io.ReadFull(tr, data); err != nil {
				return bad(fmt.Errorf("read: %w", err))
			}
			files[name] = File{Mode: hdr.FileInfo().Mode().Perm(), Data: data}
		case tar.TypeLink:
			return bad(fmt.Errorf("%w: hard link to %s", ErrFileType, quoteName(hdr.Linkname)))
		case tar.TypeChar, tar.TypeBlock:
			return bad(fmt.Errorf("%w: device file", ErrFileType))
		case tar.TypeFifo:
			return bad(fmt.Errorf("%w: named pipe (FIFO)", ErrFileType))
		default:
			return bad(fmt.Errorf("%w: tar type %q", ErrFileType, hdr.Typeflag))
		}
	}
	if err := checkTree(origin, files, dirs); err != nil {
		return nil, nil, err
	}
	return files, dirs, nil
}

// quoteName keeps hostile names printable in errors.
func quoteName(s string) string {
	q := strconv.QuoteToASCII(s)
	if q[1:len(q)-1] == s {
		return s
	}
	return q
}

// boundedReader fails once more than left bytes have been read.
type boundedReader struct {
	r      io.Reader
	left   int64
	origin string
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("%w: archive stream longer than its limits allow", ErrTooLarge)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
