package harbor

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func TestBundleDeterministic(t *testing.T) {
	for _, name := range samples {
		t.Run(name, func(t *testing.T) {
			task := sample(t, name)
			b1, sum1, err := task.BundleBytes()
			if err != nil {
				t.Fatal(err)
			}
			// Through disk, with other permission bits and times.
			dir := filepath.Join(t.TempDir(), "copy")
			must(t, task.Write(dir))
			must(t, os.Chmod(filepath.Join(dir, "instruction.md"), 0o600))
			must(t, os.Chtimes(filepath.Join(dir, "task.toml"), time.Now(), time.Now().Add(-time.Hour)))
			again, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			b2, sum2, err := again.BundleBytes()
			if err != nil {
				t.Fatal(err)
			}
			if sum1 != sum2 || !bytes.Equal(b1, b2) {
				t.Fatalf("bundles differ: %s vs %s", sum1, sum2)
			}
			// Entries sorted, parents first, zero times and owners.
			zr, err := gzip.NewReader(bytes.NewReader(b1))
			if err != nil {
				t.Fatal(err)
			}
			if !zr.ModTime.IsZero() || zr.Name != "" {
				t.Fatalf("gzip header carries %v %q", zr.ModTime, zr.Name)
			}
			tr := tar.NewReader(zr)
			prev := ""
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if h.Name <= prev {
					t.Fatalf("%q after %q", h.Name, prev)
				}
				prev = h.Name
				if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
					t.Fatalf("entry %s: %v %d/%d %q/%q", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
				}
				if h.Typeflag == tar.TypeReg && h.Mode != 0o644 && h.Mode != 0o755 {
					t.Fatalf("entry %s mode %o", h.Name, h.Mode)
				}
			}
			// Back from the bundle, in memory and on disk.
			back, err := ReadBundle(bytes.NewReader(b1), name, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			h0, _ := task.Hash()
			if h, _ := back.Hash(); h != h0 {
				t.Fatal("ReadBundle changed the content hash")
			}
			out := filepath.Join(t.TempDir(), "x")
			must(t, Extract(bytes.NewReader(b1), out, DefaultLimits))
			ext, err := Load(out)
			if err != nil {
				t.Fatal(err)
			}
			if h, _ := ext.Hash(); h != h0 {
				t.Fatal("Extract+Load changed the content hash")
			}
		})
	}
}

func TestReadBundleZstd(t *testing.T) {
	task := sample(t, "disk-report")
	gz, _, err := task.BundleBytes()
	if err != nil {
		t.Fatal(err)
	}
	zr, _ := gzip.NewReader(bytes.NewReader(gz))
	raw, _ := io.ReadAll(zr)
	var zs bytes.Buffer
	zw, _ := zstd.NewWriter(&zs)
	zw.Write(raw)
	zw.Close()
	for name, data := range map[string][]byte{"zstd": zs.Bytes(), "plain tar": raw} {
		back, err := ReadBundle(bytes.NewReader(data), "disk-report", DefaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if back.Instruction != task.Instruction {
			t.Fatalf("%s: instruction differs", name)
		}
	}
}

// entry is one hostile tar entry.
type entry struct {
	name, link string
	typ        byte
	data       string
	size       int64 // header size when data is empty
}

func hostileTar(t *testing.T, ents ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	base := []entry{
		{name: "instruction.md", data: "Do it.\n"},
		{name: "task.toml", data: "version = \"1.0\"\n"},
		{name: "tests/test.sh", data: "#!/bin/sh\n"},
	}
	for _, e := range append(base, ents...) {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: typ, Mode: 0o644, Size: int64(len(e.data)), Format: tar.FormatPAX}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if e.size > 0 {
			h.Size = e.size
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("%s: %v", e.name, err)
		}
		if e.size > 0 {
			// Data the header promises; written in chunks, never held.
			chunk := make([]byte, 1<<16)
			for left := e.size; left > 0; left -= int64(len(chunk)) {
				n := min(left, int64(len(chunk)))
				tw.Write(chunk[:n])
			}
		} else {
			tw.Write([]byte(e.data))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestHostileBundles(t *testing.T) {
	small := Limits{MaxFileBytes: 1 << 20, MaxTotalBytes: 2 << 20, MaxEntries: 50}
	cases := []struct {
		name string
		ents []entry
		lim  Limits
		want []string
	}{
		{"absolute path", []entry{{name: "/etc/cron.d/evil", data: "x"}}, small, []string{"/etc/cron.d/evil", "absolute"}},
		{"dot-dot traversal", []entry{{name: "environment/../../evil", data: "x"}}, small, []string{"environment/../../evil", "not clean"}},
		{"leading dot-dot", []entry{{name: "../evil", data: "x"}}, small, []string{"../evil", "leaves the task"}},
		{"absolute symlink", []entry{{name: "environment/etc", link: "/etc", typ: tar.TypeSymlink}}, small, []string{"environment/etc", "absolute target"}},
		{"relative symlink escape", []entry{{name: "environment/up", link: "../../..", typ: tar.TypeSymlink}}, small, []string{"environment/up", "above the task root"}},
		{"escape through a link chain", []entry{
			{name: "environment/here", link: ".", typ: tar.TypeSymlink},
			{name: "environment/sneaky", link: "here/../../../etc/passwd", typ: tar.TypeSymlink},
		}, small, []string{"environment/sneaky", "above the task root"}},
		{"file written through a link", []entry{
			{name: "environment/d", link: "../tests", typ: tar.TypeSymlink},
			{name: "environment/d/evil", data: "x"},
		}, small, []string{"environment/d/evil", "environment/d is a link"}},
		{"empty link target", []entry{{name: "environment/nothing", typ: tar.TypeSymlink}}, small, []string{"environment/nothing", "empty target"}},
		{"hard link", []entry{{name: "environment/h", link: "task.toml", typ: tar.TypeLink}}, small, []string{"environment/h", "hard link"}},
		{"char device", []entry{{name: "environment/null", typ: tar.TypeChar}}, small, []string{"environment/null", "device"}},
		{"block device", []entry{{name: "environment/sda", typ: tar.TypeBlock}}, small, []string{"environment/sda", "device"}},
		{"fifo", []entry{{name: "environment/p", typ: tar.TypeFifo}}, small, []string{"environment/p", "FIFO"}},
		{"per-file size", []entry{{name: "environment/big", size: small.MaxFileBytes + 1}}, small, []string{"environment/big", "1048577 bytes"}},
		{"total size", []entry{
			{name: "environment/a", size: small.MaxFileBytes}, {name: "environment/b", size: small.MaxFileBytes},
		}, small, []string{"environment/b", "in total"}},
		{"entry count", func() []entry {
			var es []entry
			for i := 0; i < 60; i++ {
				es = append(es, entry{name: "environment/f" + strings.Repeat("x", i), data: "x"})
			}
			return es
		}(), small, []string{"too many entries", "more than 50"}},
		{"non-UTF-8 name", []entry{{name: "environment/caf\xe9", data: "x"}}, small, []string{`environment/caf\xe9`, "UTF-8"}},
		{"duplicate entry", []entry{{name: "tests/test.sh", data: "again"}}, small, []string{"tests/test.sh", "duplicate"}},
		{"backslash in name", []entry{{name: "environment/a\\b", data: "x"}}, small, []string{"backslash"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := hostileTar(t, c.ents...)
			_, err := ReadBundle(bytes.NewReader(data), "hostile", c.lim)
			wantErr(t, err, c.want...)
			dir := filepath.Join(t.TempDir(), "out")
			err = Extract(bytes.NewReader(data), dir, c.lim)
			wantErr(t, err, c.want...)
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("a refused archive left %d entries behind", len(ents))
			}
		})
	}
	t.Run("not an archive", func(t *testing.T) {
		_, err := ReadBundle(strings.NewReader("definitely not a tar file, just some text that is long enough to fill a block? no."), "junk", small)
		if err == nil || !strings.Contains(err.Error(), "bundle junk") {
			t.Fatalf("err %v", err)
		}
		_, err = ReadBundle(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}), "gz", small)
		if err == nil || !strings.Contains(err.Error(), "gzip") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("extract into a non-empty directory", func(t *testing.T) {
		dir := t.TempDir()
		must(t, os.WriteFile(filepath.Join(dir, "keep"), nil, 0o644))
		b, _, _ := sample(t, "disk-report").BundleBytes()
		if err := Extract(bytes.NewReader(b), dir, DefaultLimits); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("inside links survive", func(t *testing.T) {
		data := hostileTar(t, entry{name: "environment/data.txt", data: "x"}, entry{name: "tests/data", link: "../environment/data.txt", typ: tar.TypeSymlink})
		dir := filepath.Join(t.TempDir(), "out")
		must(t, Extract(bytes.NewReader(data), dir, small))
		got, err := os.ReadFile(filepath.Join(dir, "tests", "data"))
		if err != nil || string(got) != "x" {
			t.Fatalf("%q %v", got, err)
		}
	})
}

func TestBundleStreamBound(t *testing.T) {
	// Consecutive PAX extended headers are folded into the next entry by
	// the tar reader, so they never count as entries; repeated ones
	// compress to almost nothing. Only the stream budget stops them.
	lim := Limits{MaxFileBytes: 1 << 10, MaxTotalBytes: 1 << 10, MaxEntries: 4}
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	must(t, tw.WriteHeader(&tar.Header{Name: "x", Typeflag: tar.TypeReg, Mode: 0o644, Format: tar.FormatPAX,
		PAXRecords: map[string]string{"comment": strings.Repeat("a", 500<<10)}}))
	must(t, tw.Close())
	b := raw.Bytes()
	paxPart, rest := b[:len(b)-3*512], b[len(b)-3*512:]
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for range 40 {
		zw.Write(paxPart)
	}
	zw.Write(rest)
	zw.Close()
	if buf.Len() > 1<<20 {
		t.Fatalf("test archive is %d bytes; not a bomb", buf.Len())
	}
	_, err := ReadBundle(bytes.NewReader(buf.Bytes()), "bomb", lim)
	if err == nil || !strings.Contains(err.Error(), "archive stream longer than its limits allow") {
		t.Fatalf("err %v", err)
	}
}
