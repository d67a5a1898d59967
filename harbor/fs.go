package harbor

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// FS returns the task as a read-only file system, instruction.md and
// task.toml included, as Write would lay it out: for walking, hashing or
// copying (os.CopyFS) without a temporary directory. Links appear as
// links (fs.ReadLinkFS); Open follows them inside the task. Times are the
// Unix epoch. Later changes to t are not reflected.
func (t *Task) FS() (fs.FS, error) {
	files, err := t.allFiles()
	if err != nil {
		return nil, err
	}
	m := &memFS{files: files, dirs: map[string][]string{".": nil}}
	for p := range files {
		child := p
		for d := path.Dir(p); ; d = path.Dir(d) {
			_, seen := m.dirs[d]
			m.dirs[d] = append(m.dirs[d], path.Base(child))
			if seen || d == "." {
				break
			}
			child = d
		}
	}
	for d, names := range m.dirs {
		slices.Sort(names)
		m.dirs[d] = slices.Compact(names)
	}
	return m, nil
}

type memFS struct {
	files map[string]File
	dirs  map[string][]string
}

// resolve follows links in name (at most 40), staying inside the task.
func (m *memFS) resolve(name string) (string, error) {
	parts := strings.Split(name, "/")
	if name == "." {
		parts = nil
	}
	var pos []string
	for hops := 0; len(parts) > 0; {
		pos = append(pos, parts[0])
		parts = parts[1:]
		f, ok := m.files[strings.Join(pos, "/")]
		if !ok || f.Link == "" {
			continue
		}
		if hops++; hops > 40 {
			return "", fs.ErrInvalid
		}
		target := path.Join(append([]string{path.Dir(strings.Join(pos, "/"))}, f.Link)...)
		if target == ".." || strings.HasPrefix(target, "../") || path.IsAbs(f.Link) {
			return "", fs.ErrNotExist
		}
		parts = append(strings.Split(target, "/"), parts...)
		pos = nil
		if target == "." {
			parts = parts[1:]
		}
	}
	if len(pos) == 0 {
		return ".", nil
	}
	return strings.Join(pos, "/"), nil
}

func (m *memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	real, err := m.resolve(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if f, ok := m.files[real]; ok {
		return &memFile{info: fileInfo{name: path.Base(name), f: f}, r: bytes.NewReader(f.Data)}, nil
	}
	if names, ok := m.dirs[real]; ok {
		return &memDir{fs: m, path: real, info: fileInfo{name: path.Base(name), dir: true}, names: names}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadLink implements fs.ReadLinkFS.
func (m *memFS) ReadLink(name string) (string, error) {
	f, ok := m.files[name]
	if !ok || f.Link == "" {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	return f.Link, nil
}

// Lstat implements fs.ReadLinkFS.
func (m *memFS) Lstat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrInvalid}
	}
	dir, err := m.resolve(path.Dir(name))
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: err}
	}
	p := path.Join(dir, path.Base(name))
	if name == "." {
		p = "."
	}
	if f, ok := m.files[p]; ok {
		return fileInfo{name: path.Base(name), f: f}, nil
	}
	if _, ok := m.dirs[p]; ok {
		return fileInfo{name: path.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: "lstat", Path: name, Err: fs.ErrNotExist}
}

type fileInfo struct {
	name string
	f    File
	dir  bool
}

func (i fileInfo) Name() string { return i.name }
func (i fileInfo) Size() int64  { return int64(len(i.f.Data)) }
func (i fileInfo) Mode() fs.FileMode {
	switch {
	case i.dir:
		return fs.ModeDir | 0o755
	case i.f.Link != "":
		return fs.ModeSymlink | 0o777
	}
	return fs.FileMode(normMode(i.f))
}
func (i fileInfo) ModTime() time.Time { return epoch }
func (i fileInfo) IsDir() bool        { return i.dir }
func (i fileInfo) Sys() any           { return nil }

type memFile struct {
	info fileInfo
	r    *bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Read(b []byte) (int, error) { return f.r.Read(b) }
func (f *memFile) Seek(off int64, whence int) (int64, error) {
	return f.r.Seek(off, whence)
}
func (f *memFile) ReadAt(b []byte, off int64) (int, error) { return f.r.ReadAt(b, off) }
func (f *memFile) Close() error                            { return nil }

type memDir struct {
	fs    *memFS
	path  string
	info  fileInfo
	names []string
	off   int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.path, Err: fs.ErrInvalid}
}
func (d *memDir) Close() error { return nil }

func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.names[d.off:]
	if n > 0 && len(rest) == 0 {
		return nil, io.EOF
	}
	if n > 0 && len(rest) > n {
		rest = rest[:n]
	}
	d.off += len(rest)
	out := make([]fs.DirEntry, 0, len(rest))
	for _, name := range rest {
		info, err := d.fs.Lstat(path.Join(d.path, name))
		if err != nil {
			return nil, err
		}
		out = append(out, fs.FileInfoToDirEntry(info))
	}
	return out, nil
}
