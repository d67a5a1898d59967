package harbor

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The fixed names of a Harbor task directory.
const (
	InstructionFile = "instruction.md"
	ConfigFile      = "task.toml"
	EnvironmentDir  = "environment"
	DockerfilePath  = "environment/Dockerfile"
	SetupScriptPath = "environment/setup.sh"
	SolutionPath    = "solution/solve.sh"
	TestsDir        = "tests"
	TestScriptPath  = "tests/test.sh"
)

// Limits bound what Load, ReadBundle and Extract accept, so that a hostile
// task cannot exhaust memory or disk.
type Limits struct {
	MaxFileBytes  int64 // one file
	MaxTotalBytes int64 // all files together
	MaxEntries    int   // files, directories and links
}

// DefaultLimits suit Terminal-Bench tasks, whose largest checked-in assets
// are a few MiB.
var DefaultLimits = Limits{MaxFileBytes: 32 << 20, MaxTotalBytes: 128 << 20, MaxEntries: 10000}

// File is one file of a task other than instruction.md and task.toml.
// Mode holds permission bits only (os.ModePerm); a symbolic link has
// Link set and no Data.
type File struct {
	Mode fs.FileMode
	Data []byte
	Link string
}

// Executable reports whether any execute bit is set.
func (f File) Executable() bool { return f.Mode&0o111 != 0 }

// Task is a Harbor task held in memory: the instruction, the parsed
// task.toml and every other file keyed by its slash-separated path
// relative to the task root ("environment/Dockerfile", "tests/test.sh").
type Task struct {
	// Name is the directory's base name (or the [task] name of a Harbor
	// 1.1 package); it does not enter the content hash.
	Name        string
	Instruction string
	Config      *Config
	Files       map[string]File
}

// Error is a task problem tied to one file (and, for task.toml, a field).
type Error struct {
	Task string // directory or bundle the task came from
	Path string // file inside the task, slash-separated
	Err  error
}

func (e *Error) Error() string {
	var fe *FieldError
	if errors.As(e.Err, &fe) {
		// FieldError already names task.toml.
		return e.Task + "/" + fe.Error()
	}
	if e.Path == "" {
		return e.Task + ": " + e.Err.Error()
	}
	return e.Task + "/" + e.Path + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Sentinel causes, for errors.Is.
var (
	ErrMissing   = errors.New("required file is missing")
	ErrTooLarge  = errors.New("over the size limit")
	ErrTooMany   = errors.New("too many entries")
	ErrNotUTF8   = errors.New("not valid UTF-8")
	ErrEscapes   = errors.New("link points outside the task")
	ErrFileType  = errors.New("unsupported file type")
	ErrUnsafe    = errors.New("unsafe path")
	ErrDuplicate = errors.New("duplicate entry")
)

// Load reads and validates the task directory dir with DefaultLimits.
func Load(dir string) (*Task, error) { return LoadLimits(dir, DefaultLimits) }

// LoadLimits is Load with explicit limits. Symbolic links are kept as links
// and must resolve inside the task; devices, FIFOs and sockets are refused.
func LoadLimits(dir string, lim Limits) (*Task, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, &Error{Task: dir, Err: errors.New("not a directory")}
	}
	// A symlinked task root is followed (WalkDir would not descend into
	// it); links inside the task are kept as links.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", dir, err)
	}
	files := map[string]File{}
	var total int64
	entries := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if err := checkName(rel); err != nil {
			return &Error{Task: dir, Path: strconv.QuoteToASCII(rel), Err: err}
		}
		if entries++; entries > lim.MaxEntries {
			return &Error{Task: dir, Path: rel, Err: fmt.Errorf("%w: more than %d", ErrTooMany, lim.MaxEntries)}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			return nil
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			files[rel] = File{Mode: 0o777, Link: target}
		case mode.IsRegular():
			if info.Size() > lim.MaxFileBytes {
				return &Error{Task: dir, Path: rel, Err: fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, info.Size(), lim.MaxFileBytes)}
			}
			if total += info.Size(); total > lim.MaxTotalBytes {
				return &Error{Task: dir, Path: rel, Err: fmt.Errorf("%w: task exceeds %d bytes in total", ErrTooLarge, lim.MaxTotalBytes)}
			}
			data, err := readBounded(p, lim.MaxFileBytes)
			if err != nil {
				return &Error{Task: dir, Path: rel, Err: err}
			}
			files[rel] = File{Mode: mode.Perm(), Data: data}
		default:
			return &Error{Task: dir, Path: rel, Err: fmt.Errorf("%w: %s", ErrFileType, fileType(mode))}
		}
		return nil
	})
	if err != nil {
		var te *Error
		if errors.As(err, &te) {
			return nil, te
		}
		return nil, fmt.Errorf("task %s: %w", dir, err)
	}
	return FromFiles(filepath.Base(filepath.Clean(dir)), dir, files)
}

func readBounded(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have grown since Lstat; read one byte past the limit.
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: limit %d bytes", ErrTooLarge, max)
	}
	return data, nil
}

func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	}
	return m.Type().String()
}

// checkName accepts a relative, clean, slash-separated UTF-8 path.
func checkName(p string) error {
	switch {
	case !utf8.ValidString(p):
		return fmt.Errorf("%w: file name is not valid UTF-8", ErrNotUTF8)
	case p == "" || strings.HasPrefix(p, "/"):
		return fmt.Errorf("%w: absolute or empty path", ErrUnsafe)
	case strings.ContainsAny(p, "\x00\\"):
		return fmt.Errorf("%w: NUL or backslash in path", ErrUnsafe)
	case path.Clean(p) != p:
		return fmt.Errorf("%w: path is not clean (want %q)", ErrUnsafe, path.Clean(p))
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("%w: path leaves the task", ErrUnsafe)
	}
	return nil
}

// FromFiles builds and validates a task from its files (instruction.md and
// task.toml included), as Load and ReadBundle do. origin names the source
// in errors.
func FromFiles(name, origin string, files map[string]File) (*Task, error) {
	fail := func(p string, err error) (*Task, error) { return nil, &Error{Task: origin, Path: p, Err: err} }
	rest := make(map[string]File, len(files))
	for p, f := range files {
		if err := checkName(p); err != nil {
			return fail(strconv.QuoteToASCII(p), err)
		}
		rest[p] = f
	}
	t := &Task{Name: name, Files: rest}
	for _, req := range []string{InstructionFile, ConfigFile, TestScriptPath} {
		f, ok := rest[req]
		if !ok {
			return fail(req, ErrMissing)
		}
		if f.Link != "" {
			return fail(req, fmt.Errorf("%w: must be a regular file, not a link", ErrFileType))
		}
	}
	instr := rest[InstructionFile].Data
	if !utf8.Valid(instr) {
		off := invalidUTF8Offset(instr)
		return fail(InstructionFile, fmt.Errorf("%w at byte %d (line %d)", ErrNotUTF8, off, bytes.Count(instr[:off], []byte("\n"))+1))
	}
	if len(bytes.TrimSpace(instr)) == 0 {
		return fail(InstructionFile, errors.New("is empty"))
	}
	cfg, err := ParseConfig(rest[ConfigFile].Data)
	if err != nil {
		return fail(ConfigFile, err)
	}
	if pkg, ok := cfg.doc["task"].(map[string]any); ok {
		if n, ok := pkg["name"].(string); ok && n != "" {
			t.Name = n
		}
	}
	t.Instruction, t.Config = string(instr), cfg
	delete(rest, InstructionFile)
	delete(rest, ConfigFile)
	if err := t.checkFiles(origin); err != nil {
		return nil, err
	}
	return t, nil
}

// checkFiles validates what Files holds: names, links and the test script.
func (t *Task) checkFiles(origin string) error {
	for p := range t.Files {
		if p == InstructionFile || p == ConfigFile {
			return &Error{Task: origin, Path: p, Err: fmt.Errorf("%w: set Instruction or Config instead", ErrDuplicate)}
		}
	}
	if err := checkTree(origin, t.Files, nil); err != nil {
		return err
	}
	if f, ok := t.Files[TestScriptPath]; !ok || f.Link != "" {
		return &Error{Task: origin, Path: TestScriptPath, Err: ErrMissing}
	}
	return nil
}

// checkTree validates a set of files and directories: clean names, nothing
// below a file or a link (writing through a link is how archives escape
// their directory), and every link resolving inside the root.
func checkTree(origin string, files map[string]File, dirs map[string]bool) error {
	under := func(p string) error {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if parent, ok := files[d]; ok {
				kind := "file"
				if parent.Link != "" {
					kind = "link"
				}
				return &Error{Task: origin, Path: p, Err: fmt.Errorf("%w: %s is a %s", ErrUnsafe, d, kind)}
			}
		}
		return nil
	}
	for _, p := range sortedKeys(files) {
		if err := checkName(p); err != nil {
			return &Error{Task: origin, Path: strconv.QuoteToASCII(p), Err: err}
		}
		if err := under(p); err != nil {
			return err
		}
		if files[p].Link != "" {
			if err := resolveInside(files, p); err != nil {
				return &Error{Task: origin, Path: p, Err: err}
			}
		}
	}
	for d := range dirs {
		if err := checkName(d); err != nil {
			return &Error{Task: origin, Path: strconv.QuoteToASCII(d), Err: err}
		}
		if _, ok := files[d]; ok {
			return &Error{Task: origin, Path: d, Err: fmt.Errorf("%w: both a directory and a file", ErrDuplicate)}
		}
		if err := under(d); err != nil {
			return err
		}
	}
	return nil
}

// resolveInside follows the link at p the way the kernel would, through
// other links in files, and fails if any step leaves the task root.
func resolveInside(files map[string]File, p string) error {
	const maxHops = 40
	pending := strings.Split(p, "/")
	var pos []string
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(pos) == 0 {
				return fmt.Errorf("%w: %q resolves above the task root", ErrEscapes, files[p].Link)
			}
			pos = pos[:len(pos)-1]
			continue
		}
		pos = append(pos, c)
		f, ok := files[strings.Join(pos, "/")]
		if !ok || f.Link == "" {
			continue
		}
		if hops++; hops > maxHops {
			return fmt.Errorf("%w: too many levels of links", ErrEscapes)
		}
		if strings.HasPrefix(f.Link, "/") {
			return fmt.Errorf("%w: absolute target %q", ErrEscapes, f.Link)
		}
		if !utf8.ValidString(f.Link) || strings.ContainsRune(f.Link, 0) {
			return fmt.Errorf("%w: link target is not valid UTF-8", ErrNotUTF8)
		}
		pos = pos[:len(pos)-1]
		pending = append(strings.Split(f.Link, "/"), pending...)
	}
	return nil
}

// Paths lists Files in sorted order.
func (t *Task) Paths() []string {
	ps := make([]string, 0, len(t.Files))
	for p := range t.Files {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// Validate checks a task built or edited in memory by the same rules Load
// applies to a directory.
func (t *Task) Validate() error {
	files, err := t.allFiles()
	if err != nil {
		return err
	}
	_, err = FromFiles(t.Name, "task "+t.Name, files)
	return err
}

// allFiles is Files plus instruction.md and task.toml as they would be
// written.
func (t *Task) allFiles() (map[string]File, error) {
	if t.Config == nil {
		return nil, &Error{Task: "task " + t.Name, Path: ConfigFile, Err: ErrMissing}
	}
	cfg, err := t.Config.Marshal()
	if err != nil {
		return nil, err
	}
	all := make(map[string]File, len(t.Files)+2)
	for p, f := range t.Files {
		all[p] = f
	}
	all[InstructionFile] = File{Mode: 0o644, Data: []byte(t.Instruction)}
	if f, ok := t.Files[InstructionFile]; ok {
		all[InstructionFile] = File{Mode: f.Mode, Data: []byte(t.Instruction)}
	}
	all[ConfigFile] = File{Mode: 0o644, Data: cfg}
	return all, nil
}

// Write writes the task into dir, which must not exist or be empty. A task
// loaded and written unchanged reproduces every file byte for byte, with
// its permission bits.
func (t *Task) Write(dir string) error {
	files, err := t.allFiles()
	if err != nil {
		return err
	}
	if _, err := FromFiles(t.Name, dir, files); err != nil {
		return err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("write task to %s: directory is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write task: %w", err)
	}
	for _, p := range sortedKeys(files) {
		if err := writeEntry(dir, p, files[p]); err != nil {
			return fmt.Errorf("write task %s: %w", dir, err)
		}
	}
	return nil
}

// writeEntry creates one file or link below root; root must already be
// checked (names clean, links inside).
func writeEntry(root, p string, f File) error {
	dst := filepath.Join(root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if f.Link != "" {
		return os.Symlink(f.Link, dst)
	}
	mode := f.Mode.Perm()
	if mode == 0 {
		mode = 0o644
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := out.Write(f.Data); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// The umask may have narrowed the mode given to OpenFile.
	return os.Chmod(dst, mode)
}

func sortedKeys(m map[string]File) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// normMode is the mode bundles and hashes record: git keeps only the
// execute bit, so two checkouts of one task must agree.
func normMode(f File) int64 {
	switch {
	case f.Link != "":
		return 0o777
	case f.Executable():
		return 0o755
	}
	return 0o644
}

// Hash is the task's content hash: SHA-256, in hex, over every file
// (instruction.md and task.toml as written) in path order, each framed as
// path, normalised mode, link target and length-prefixed data. The task
// name and file times do not enter it.
func (t *Task) Hash() (string, error) {
	files, err := t.allFiles()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	w := bufio.NewWriter(h)
	for _, p := range sortedKeys(files) {
		f := files[p]
		fmt.Fprintf(w, "%d:%s\x00%o\x00%d:%s\x00%d:", len(p), p, normMode(f), len(f.Link), f.Link, len(f.Data))
		w.Write(f.Data)
		w.WriteByte('\n')
	}
	w.Flush()
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ID is the stable task id: "task-" and the first 20 hex digits of Hash.
// Equal content gives equal ids, whatever the directory is called.
func (t *Task) ID() (string, error) {
	h, err := t.Hash()
	if err != nil {
		return "", err
	}
	return "task-" + h[:20], nil
}

// EnvironmentKind says how the task's environment is built: "dockerfile",
// "compose" (environment/docker-compose.yaml, multi-container tasks),
// "setup.sh", "image" (a prebuilt [environment] docker_image) or "none".
func (t *Task) EnvironmentKind() string {
	switch {
	case t.has(DockerfilePath):
		return "dockerfile"
	case t.has("environment/docker-compose.yaml") || t.has("environment/docker-compose.yml"):
		return "compose"
	case t.has(SetupScriptPath):
		return "setup.sh"
	case t.Config != nil && t.Config.Environment.DockerImage != "":
		return "image"
	}
	return "none"
}

func (t *Task) has(p string) bool { _, ok := t.Files[p]; return ok }

// TestFiles lists the files under tests/ other than test.sh.
func (t *Task) TestFiles() []string {
	var out []string
	for _, p := range t.Paths() {
		if strings.HasPrefix(p, TestsDir+"/") && p != TestScriptPath {
			out = append(out, p)
		}
	}
	return out
}

// PytestFiles lists the pytest modules under tests/ (test_*.py, *_test.py).
func (t *Task) PytestFiles() []string {
	var out []string
	for _, p := range t.TestFiles() {
		b := path.Base(p)
		if strings.HasSuffix(b, ".py") && (strings.HasPrefix(b, "test_") || strings.HasSuffix(b, "_test.py")) {
			out = append(out, p)
		}
	}
	return out
}

// CountTestFunctions counts top-level and method test functions ("def
// test_…", "async def test_…") in the pytest modules: a static estimate of
// the assertions the verifier will report, before anything runs.
func (t *Task) CountTestFunctions() int {
	n := 0
	for _, p := range t.PytestFiles() {
		for _, line := range strings.Split(string(t.Files[p].Data), "\n") {
			s := strings.TrimSpace(line)
			s = strings.TrimPrefix(s, "async ")
			if strings.HasPrefix(s, "def test") {
				n++
			}
		}
	}
	return n
}

// WorkDir is the last WORKDIR of environment/Dockerfile (the directory
// test.sh runs in), or "" when the task does not say.
func (t *Task) WorkDir() string {
	f, ok := t.Files[DockerfilePath]
	if !ok {
		return ""
	}
	wd := ""
	for _, line := range strings.Split(string(f.Data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && strings.EqualFold(fields[0], "WORKDIR") {
			d := strings.Trim(strings.Join(fields[1:], " "), `"'`)
			if !strings.HasPrefix(d, "/") && wd != "" {
				d = path.Join(wd, d)
			}
			wd = d
		}
	}
	return wd
}
