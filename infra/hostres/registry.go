package hostres

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Kind is what a record stands for, which says how to remove it.
type Kind string

const (
	Mount  Kind = "mount"  // a mount point; FS says which file system
	Cgroup Kind = "cgroup" // a cgroup directory (v1 or v2)
	Dir    Kind = "dir"    // a directory and all it holds
	File   Kind = "file"   // a file
)

// Entry is one recorded resource.
type Entry struct {
	Seq     int       `json:"seq"`
	Kind    Kind      `json:"kind"`
	Path    string    `json:"path"`
	FS      string    `json:"fs,omitempty"`     // Mount: the file system type mountinfo shows
	Source  string    `json:"source,omitempty"` // Mount: the source mountinfo shows, when fixed
	Note    string    `json:"note,omitempty"`
	Created time.Time `json:"created"`
}

// Owner is a process that records resources.
type Owner struct {
	PID     int       `json:"pid"`
	Start   uint64    `json:"start"` // clock ticks after boot, /proc/<pid>/stat field 22
	Boot    string    `json:"boot"`
	UID     int       `json:"uid"`
	Parent  int       `json:"parent"` // the pid that started it
	Args    []string  `json:"args"`
	Created time.Time `json:"created"`
}

// RootDir is the registry's directory for the calling user.
func RootDir() string {
	if d := os.Getenv("T1_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "owners")
	}
	if os.Geteuid() == 0 {
		return "/run/t1/owners"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "t1", "owners")
	}
	return filepath.Join(os.TempDir(), "t1-"+strconv.Itoa(os.Geteuid()), "owners")
}

// Registry is the registry in one directory.
type Registry struct {
	dir string

	mu   sync.Mutex
	once *sync.Once
	own  string // this process's directory; "" until the first Record
	err  error
	seq  atomic.Int64
}

// Open returns the registry in dir.
func Open(dir string) *Registry { return &Registry{dir: dir, once: &sync.Once{}} }

var defaultReg = sync.OnceValue(func() *Registry { return Open(RootDir()) })

// Default is the registry of RootDir.
func Default() *Registry { return defaultReg() }

// Claim is one record of this process; Release drops it once the
// resource is gone.
type Claim struct {
	path string
}

// Release removes the record. A nil Claim is a no-op, so that callers
// can release what they may not have recorded.
func (c *Claim) Release() {
	if c == nil || c.path == "" {
		return
	}
	if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		slog.Warn("hostres: releasing record", "record", c.path, "err", err)
	}
	c.path = ""
}

// Record records a resource of this process before it is created. Its
// error means the resource must not be created: nothing would find it
// if the process died.
func Record(kind Kind, path, note string) (*Claim, error) {
	return Default().Record(Entry{Kind: kind, Path: path, Note: note})
}

// RecordMount records a mount of fs (with source, when fixed) at path.
func RecordMount(path, fs, source, note string) (*Claim, error) {
	return Default().Record(Entry{Kind: Mount, Path: path, FS: fs, Source: source, Note: note})
}

// Start reaps what dead owners left and makes this process's directory,
// once per process; Record does the same on its first call.
func (r *Registry) Start() error {
	r.mu.Lock()
	once := r.once
	r.mu.Unlock()
	once.Do(r.start)
	return r.err
}

// Start is Default().Start.
func Start() error { return Default().Start() }

// Record records e under this process.
func (r *Registry) Record(e Entry) (*Claim, error) {
	if err := r.Start(); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(e.Path) {
		abs, err := filepath.Abs(e.Path)
		if err != nil {
			return nil, fmt.Errorf("hostres: %w", err)
		}
		e.Path = abs
	}
	// The parent is the host's own, trusted when it is made: recording
	// its real path lets removal refuse every link later.
	if real, err := filepath.EvalSymlinks(filepath.Dir(e.Path)); err == nil {
		e.Path = filepath.Join(real, filepath.Base(e.Path))
	}
	e.Seq = int(r.seq.Add(1))
	e.Created = time.Now().UTC()
	data, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	own := r.own
	r.mu.Unlock()
	p := filepath.Join(own, fmt.Sprintf("%09d.json", e.Seq))
	if err := writeNew(p, data); err != nil {
		return nil, fmt.Errorf("hostres: recording %s %s: %w", e.Kind, e.Path, err)
	}
	return &Claim{path: p}, nil
}

// writeNew writes a file that must not exist, and follows no link.
func writeNew(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// start reaps what dead owners left, then makes this process's
// directory.
func (r *Registry) start() {
	if err := ensureDir(r.dir); err != nil {
		r.err = fmt.Errorf("hostres: registry %s: %w", r.dir, err)
		return
	}
	if rep, err := r.Reap(); err != nil {
		slog.Warn("hostres: reaping what dead t1 processes left", "err", err)
	} else if rep.Removed > 0 {
		slog.Info("hostres: removed what dead t1 processes left", "owners", rep.Owners, "resources", rep.Removed)
	}
	self, err := Self()
	if err != nil {
		r.err = err
		return
	}
	d := filepath.Join(r.dir, self.name())
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		r.err = fmt.Errorf("hostres: %w", err)
		return
	}
	if err := checkOwnDir(d); err != nil {
		r.err = err
		return
	}
	data, _ := json.Marshal(self)
	if err := writeNew(filepath.Join(d, "owner"), data); err != nil && !errors.Is(err, os.ErrExist) {
		r.err = fmt.Errorf("hostres: %w", err)
		return
	}
	r.mu.Lock()
	r.own = d
	r.mu.Unlock()
}

// ensureDir makes dir and its parent, 0700, and checks that it is a
// directory of the caller's, not a link: a registry another user could
// write would let that user name what this one removes.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The parent t1 made (t1/ or t1-<uid>/) must be the caller's too, or
	// root's: another user who owns it could swap the registry.
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Dir(dir), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || (int(st.Uid) != os.Geteuid() && st.Uid != 0) || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s belongs to uid %d, mode %o: the registry's parent must be the caller's and closed to others", filepath.Dir(dir), st.Uid, st.Mode&0o777)
	}
	return checkOwnDir(dir)
}

func checkOwnDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s belongs to uid %d, mode %o: the registry must be the caller's and closed to others", dir, st.Uid, st.Mode&0o777)
	}
	return nil
}

func (o Owner) name() string { return fmt.Sprintf("%d-%d", o.PID, o.Start) }

// Self is this process as an Owner.
func Self() (Owner, error) {
	start, err := StartTime(os.Getpid())
	if err != nil {
		return Owner{}, fmt.Errorf("hostres: own start time: %w", err)
	}
	return Owner{PID: os.Getpid(), Start: start, Boot: bootID(), UID: os.Geteuid(), Parent: os.Getppid(), Args: os.Args, Created: time.Now().UTC()}, nil
}

// StartTime is field 22 of /proc/<pid>/stat: when the process started,
// in clock ticks after boot.
func StartTime(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start past its last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// Alive says whether the process o recorded still runs.
func (o Owner) Alive() bool {
	if o.Boot != "" && o.Boot != bootID() {
		return false
	}
	start, err := StartTime(o.PID)
	return err == nil && start == o.Start
}

// Own lists what this process still records, oldest first.
func (r *Registry) Own() []Entry {
	r.mu.Lock()
	own := r.own
	r.mu.Unlock()
	if own == "" {
		return nil
	}
	es, _ := readEntries(own)
	return es
}

// ReleaseOwn removes whatever this process still records, newest first,
// and its directory: for the end of a process, where an error path or a
// signal may have left something behind.
func (r *Registry) ReleaseOwn() error {
	r.mu.Lock()
	own := r.own
	r.mu.Unlock()
	if own == "" {
		return nil
	}
	if err := r.reapOwner(own, nil); err != nil {
		return err
	}
	// A later Record (a test after the check) starts the directory anew.
	r.mu.Lock()
	r.own, r.once = "", &sync.Once{}
	r.mu.Unlock()
	return nil
}

// Leaks lists what this process still records (own) and what its
// children that have ended left behind (children), and then removes
// both: a test binary calls it at its end, to leave the host as it found
// it. What it itself still records is a Close that did not remove what
// it made; what a child killed on purpose left is what the next start
// would have removed.
func Leaks() (own, children []string) {
	r := Default()
	for _, e := range r.Own() {
		own = append(own, fmt.Sprintf("pid %d (this process): %s %s (%s)", os.Getpid(), e.Kind, e.Path, e.Note))
	}
	if err := r.ReleaseOwn(); err != nil {
		own = append(own, err.Error())
	}
	names, _ := os.ReadDir(r.dir)
	for _, n := range names {
		d := filepath.Join(r.dir, n.Name())
		o, err := readOwner(d)
		if err != nil || o.Parent != os.Getpid() || o.Alive() {
			continue
		}
		es, _ := readEntries(d)
		for _, e := range es {
			if measure(e).Exists {
				children = append(children, fmt.Sprintf("pid %d (ended, started by this process): %s %s (%s)", o.PID, e.Kind, e.Path, e.Note))
			}
		}
		var rep Report
		if err := r.reapOwner(d, &rep); err != nil {
			own = append(own, fmt.Sprintf("pid %d: %v %q", o.PID, err, rep.Failed))
		}
	}
	return own, children
}

// Exit is ReleaseOwn for the end of a command, which says on stderr what
// it could not remove (it stays recorded for the next start).
func Exit() {
	if err := ReleaseOwn(); err != nil {
		slog.Warn("hostres: removing what this process made on the host", "err", err)
	}
}

// ReleaseOwn is Default().ReleaseOwn.
func ReleaseOwn() error { return Default().ReleaseOwn() }

// TempName is pattern with "*" (or, without one, its end) replaced by a
// random string, as os.MkdirTemp would name it, but known before the
// directory exists so that it can be recorded first.
func TempName(dir, pattern string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	r := hex.EncodeToString(b[:])
	if i := strings.LastIndex(pattern, "*"); i >= 0 {
		return filepath.Join(dir, pattern[:i]+r+pattern[i+1:])
	}
	return filepath.Join(dir, pattern+r)
}

// MkdirTemp is os.MkdirTemp with the directory recorded first; release
// removes it and its record.
func MkdirTemp(dir, pattern, note string) (string, func(), error) {
	if dir == "" {
		dir = os.TempDir()
	}
	for range 100 {
		p := TempName(dir, pattern)
		c, err := Record(Dir, p, note)
		if err != nil {
			return "", nil, err
		}
		err = os.Mkdir(p, 0o700)
		if errors.Is(err, os.ErrExist) {
			c.Release()
			continue
		}
		if err != nil {
			c.Release()
			return "", nil, err
		}
		return p, func() {
			if err := os.RemoveAll(p); err != nil {
				slog.Warn("hostres: removing", "dir", p, "err", err)
				return
			}
			c.Release()
		}, nil
	}
	return "", nil, fmt.Errorf("hostres: no free name for %s in %s", pattern, dir)
}

// CreateTemp is os.CreateTemp with the file recorded first; release
// closes and removes it, and its record.
func CreateTemp(dir, pattern, note string) (*os.File, func(), error) {
	if dir == "" {
		dir = os.TempDir()
	}
	for range 100 {
		p := TempName(dir, pattern)
		c, err := Record(File, p, note)
		if err != nil {
			return nil, nil, err
		}
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if errors.Is(err, os.ErrExist) {
			c.Release()
			continue
		}
		if err != nil {
			c.Release()
			return nil, nil, err
		}
		return f, func() {
			f.Close()
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				slog.Warn("hostres: removing", "file", p, "err", err)
				return
			}
			c.Release()
		}, nil
	}
	return nil, nil, fmt.Errorf("hostres: no free name for %s in %s", pattern, dir)
}

// killAt is the point T1_KILL_AT names, read once.
var killAt = sync.OnceValue(func() string { return os.Getenv("T1_KILL_AT") })

// Point kills this process with SIGKILL when T1_KILL_AT names point:
// tests use it to stop t1 in the middle of something (a command, a
// snapshot, an image build, a verifier) and check what the next start
// finds.
func Point(point string) {
	if k := killAt(); k != "" && k == point {
		_ = unix.Kill(os.Getpid(), unix.SIGKILL)
		select {}
	}
}
