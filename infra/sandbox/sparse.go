package sandbox

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Sparse files go into a layer in the PAX sparse format 1.0 (what GNU tar
// writes with --sparse --sparse-version=1.0): a PAX header naming the file
// and its real size, then a map of its data segments, then only those
// segments' bytes. archive/tar reads the format but does not write it, so
// Snapshot writes these entries itself, between the ones tar.Writer
// writes.

// segment is a run of data in a sparse file.
type segment struct{ off, n int64 }

// maxSegments bounds a file's sparse map well below the 1 MiB that
// archive/tar reads: a file with more data segments has the smallest
// holes between them stored as zeros.
const maxSegments = 16384

// dataSegments lists f's data segments (SEEK_DATA, SEEK_HOLE); false when
// the filesystem cannot say.
func dataSegments(f *os.File, size int64) ([]segment, bool) {
	fd := int(f.Fd())
	var segs []segment
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // a hole to the end
		}
		if err != nil {
			return nil, false
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, false
		}
		hole = min(hole, size)
		if hole <= data {
			break
		}
		segs = append(segs, segment{data, hole - data})
		off = hole
	}
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		return nil, false
	}
	return mergeSegments(segs, maxSegments), true
}

// mergeSegments joins segments across the smallest holes until at most
// limit remain.
func mergeSegments(segs []segment, limit int) []segment {
	if len(segs) <= limit {
		return segs
	}
	gaps := make([]int64, len(segs)-1)
	for i := range gaps {
		gaps[i] = segs[i+1].off - segs[i].off - segs[i].n
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	// Merge every gap below the threshold, and gaps equal to it while more
	// remain to merge.
	need := len(segs) - limit
	threshold := sorted[need-1]
	below := 0
	for _, g := range sorted {
		if g < threshold {
			below++
		}
	}
	equal := need - below
	out := []segment{segs[0]}
	for i, g := range gaps {
		merge := g < threshold
		if g == threshold && equal > 0 {
			merge, equal = true, equal-1
		}
		last := &out[len(out)-1]
		if merge {
			last.n = segs[i+1].off + segs[i+1].n - last.off
			continue
		}
		out = append(out, segs[i+1])
	}
	return out
}

// writeSparse writes a regular file as a PAX 1.0 sparse entry: hdr's
// name, mode, time and size (the real size), then segs' data from f.
func writeSparse(tw *tar.Writer, lw *layerWriter, f *os.File, hdr *tar.Header, segs []segment) error {
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("sandbox: snapshot %s: %w", hdr.Name, err)
	}
	var sm strings.Builder
	sm.WriteString(strconv.Itoa(len(segs)) + "\n")
	var data int64
	for _, s := range segs {
		fmt.Fprintf(&sm, "%d\n%d\n", s.off, s.n)
		data += s.n
	}
	spMap := pad([]byte(sm.String()))
	size := int64(len(spMap)) + data
	mt := hdr.ModTime
	recs := map[string]string{
		"GNU.sparse.major":    "1",
		"GNU.sparse.minor":    "0",
		"GNU.sparse.name":     hdr.Name,
		"GNU.sparse.realsize": strconv.FormatInt(hdr.Size, 10),
		"mtime":               fmt.Sprintf("%d.%09d", mt.Unix(), mt.Nanosecond()),
		"size":                strconv.FormatInt(size, 10),
	}
	var px bytes.Buffer
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range recs {
			if !yield(k) {
				return
			}
		}
	}) {
		px.WriteString(paxRecord(k, recs[k]))
	}
	dir, file := path.Split(hdr.Name)
	var out bytes.Buffer
	out.Write(ustarBlock(shortName(dir, "PaxHeaders.0", file), 'x', int64(px.Len()), 0o644, mt.Unix()))
	out.Write(pad(px.Bytes()))
	out.Write(ustarBlock(shortName(dir, "GNUSparseFile.0", file), '0', size, hdr.Mode, mt.Unix()))
	out.Write(spMap)
	if _, err := lw.Write(out.Bytes()); err != nil {
		return err
	}
	for _, s := range segs {
		n, err := io.Copy(lw, io.NewSectionReader(f, s.off, s.n))
		if err == nil && n < s.n {
			err = fmt.Errorf("file shrank while being read")
		}
		if err != nil {
			return fmt.Errorf("sandbox: snapshot %s: %w", hdr.Name, err)
		}
	}
	if r := data % 512; r != 0 {
		if _, err := lw.Write(make([]byte, 512-r)); err != nil {
			return err
		}
	}
	return nil
}

// shortName is the informational name of a header whose real name a PAX
// record carries: it must fit the 100 bytes of the ustar name field.
func shortName(dir, mid, file string) string {
	n := path.Join(dir, mid, file)
	if len(n) <= 100 && isASCII(n) {
		return n
	}
	return mid + "/" + strconv.Itoa(len(n))
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] == 0 || s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// pad extends b with zeros to a whole number of 512-byte blocks.
func pad(b []byte) []byte {
	if r := len(b) % 512; r != 0 {
		b = append(b, make([]byte, 512-r)...)
	}
	return b
}

// paxRecord formats "<len> key=value\n", whose length counts itself.
func paxRecord(k, v string) string {
	body := " " + k + "=" + v + "\n"
	n := len(body) + 1
	for n < len(body)+len(strconv.Itoa(n)) {
		n++
	}
	return strconv.Itoa(n) + body
}

// ustarBlock is a POSIX ustar header block. Sizes and times that do not
// fit its octal fields are carried by PAX records; the fields then hold
// zero.
func ustarBlock(name string, typ byte, size, mode, mtime int64) []byte {
	b := make([]byte, 512)
	octal := func(field []byte, v int64) {
		if v < 0 || v >= 1<<(3*(len(field)-1)) {
			v = 0
		}
		copy(field, fmt.Sprintf("%0*o", len(field)-1, v))
	}
	copy(b[0:100], name)
	octal(b[100:108], mode)
	octal(b[108:116], 0)
	octal(b[116:124], 0)
	octal(b[124:136], size)
	octal(b[136:148], mtime)
	copy(b[148:156], "        ")
	b[156] = typ
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// copyHoles copies r to f, seeking over each zero-filled page instead of
// writing it, so that the file gets holes there (what archive/tar yields
// for a sparse entry's holes, and what a dense file's zero pages become).
// It returns the bytes written.
func copyHoles(f *os.File, r io.Reader) (int64, error) {
	const page = 4096
	buf := make([]byte, 64<<10)
	zero := make([]byte, page)
	var off, written int64
	for {
		n, err := io.ReadFull(r, buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			// The longest run of zero pages, or of data pages.
			k := min(page, len(chunk))
			isZero := bytes.Equal(chunk[:k], zero[:k])
			for k < len(chunk) {
				m := min(page, len(chunk)-k)
				if bytes.Equal(chunk[k:k+m], zero[:m]) != isZero {
					break
				}
				k += m
			}
			if !isZero {
				if _, werr := f.WriteAt(chunk[:k], off); werr != nil {
					return written, werr
				}
				written += int64(k)
			}
			off += int64(k)
			chunk = chunk[k:]
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return written, err
		}
	}
	// A trailing hole still counts in the length.
	return written, f.Truncate(off)
}
