package sandbox

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Root changes: in image mode a write outside the writable directories
// (a solution's dpkg -i, make install, cp tool /usr/local/bin, an edited
// /etc/nginx/nginx.conf, a removed /etc/cron.d/job) lands in the
// attempt's overlay upper directory. Snapshot carries it in the layer as
// entries named from / (usr/local/bin/tool), whiteouts and opaque
// directories included; Restore applies what rootGuard admits, because
// the sandbox restoring a layer is the verifier's, which must not run
// inside what the agent planted beyond the tools it installed and the
// configuration and data it changed.

// rootSkip are the root entries Snapshot leaves out: mount points the
// sandbox puts there itself (bwrap creates them in the upper directory;
// /run holds only the shell's control files, run/t1).
var rootSkip = []string{"proc", "dev", "run"}

// rootItems lists the attempt's overlay upper directory (fs/.image/upper)
// as layer items: every name is resolved beneath fsRoot without following
// a link, so a link the sandbox planted there is stored as a link, never
// read through.
func (b *box) rootItems() ([]snapItem, error) {
	if b.image == nil || b.image.copied() {
		return nil, nil
	}
	upper := imageDir + "/upper"
	var items []snapItem
	marked := map[string]bool{} // directories already marked opaque
	err := b.fsRoot.walk(upper, func(name string, info fs.FileInfo) error {
		if name == upper {
			return nil
		}
		if len(name) >= maxPath {
			return fmt.Errorf("%w: a path is longer than %d bytes (PATH_MAX)", ErrLayerLimit, maxPath)
		}
		rel := strings.TrimPrefix(name, upper+"/")
		if _, ok := writableOrBelow(rel); ok || isRootSkip(rel) {
			if info.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		m := info.Mode()
		if b.image.kind == rootFUSE {
			// fuse-overlayfs marks an opaque directory with these entries
			// too, and whites out with .wh.<name> files where it cannot
			// make a 0:0 device.
			dir, base := path.Dir(rel), path.Base(rel)
			switch {
			case base == opaqueWhiteout || base == fuseOpaque:
				if !marked[dir] {
					marked[dir] = true
					items = append(items, snapItem{name: dir, opaque: true})
				}
				return nil
			case strings.HasPrefix(base, whiteoutPrefix) && m.IsRegular():
				items = append(items, snapItem{name: path.Join(dir, strings.TrimPrefix(base, whiteoutPrefix)), whiteout: true})
				return nil
			}
		}
		if m&fs.ModeCharDevice != 0 {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Rdev == 0 {
				items = append(items, snapItem{name: rel, whiteout: true})
			}
			return nil
		}
		if !archivable(m) {
			return nil
		}
		e := entry{mode: m, size: info.Size(), mtime: info.ModTime()}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			e.uid, e.gid = int(st.Uid), int(st.Gid)
		}
		if m&fs.ModeSymlink != 0 {
			t, err := b.fsRoot.Readlink(name)
			if err != nil {
				return err
			}
			e.target = t
		}
		items = append(items, snapItem{name: rel, src: name, e: e})
		if m.IsDir() {
			opq, err := b.opaque(name)
			if err != nil {
				return err
			}
			if opq && !marked[rel] {
				marked[rel] = true
				items = append(items, snapItem{name: rel, opaque: true})
			}
		}
		return nil
	})
	if errors.Is(err, syscall.ENAMETOOLONG) {
		return nil, fmt.Errorf("%w: a path is longer than %d bytes (PATH_MAX)", ErrLayerLimit, maxPath)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("sandbox: snapshot of the root's changes: %w", err)
	}
	return items, nil
}

// opaque says whether the upper directory's dir name is opaque (it
// replaced a directory of the image, whose contents it hides).
func (b *box) opaque(name string) (bool, error) {
	f, err := b.fsRoot.openat("xattr", name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	attrs := []string{trustedOpaque}
	if b.image.kind == rootFUSE {
		attrs = []string{fuseOpaqueXattr, UserOpaqueXattr}
	}
	for _, a := range attrs {
		var v [8]byte
		n, err := unix.Fgetxattr(int(f.Fd()), a, v[:])
		if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
			continue
		}
		if err != nil {
			return false, pathErr("xattr", name, err)
		}
		if n == 1 && v[0] == 'y' {
			return true, nil
		}
	}
	return false, nil
}

// fuse-overlayfs's own opaque marks: an attribute, and a 0:0 device
// beside its .wh..wh..opq file.
const (
	fuseOpaqueXattr = "user.fuseoverlayfs.opaque"
	fuseOpaque      = ".wh..opq"
)

func isRootSkip(rel string) bool {
	for _, s := range rootSkip {
		if rel == s || strings.HasPrefix(rel, s+"/") {
			return true
		}
	}
	return false
}

// writableOrBelow says whether rel (relative to /) is a writable
// directory or inside one.
func writableOrBelow(rel string) (string, bool) {
	for _, d := range writableDirs {
		if "/"+rel == d || strings.HasPrefix("/"+rel, d+"/") {
			return d, true
		}
	}
	return "", false
}

// pathDirs are the directories of the verifier's PATH (verifier.Path)
// relative to /: a command the image has in any of them cannot be
// replaced or shadowed by a root change.
var pathDirs = []string{"usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin", "sbin", "bin"}

// rootTops are the top-level directories where Restore applies root
// changes: where software installs and configuration and data live.
// Files directly in / are not (a /conftest.py, /pytest.ini or
// /pyproject.toml configures the verifier's pytest run from /tests).
var rootTops = []string{"usr", "opt", "srv", "home", "var", "mnt", "etc"}

// editTops are those where Restore also applies changes to what the
// image holds (edits, replacements, deletions): not /usr, whose
// existing files are the verifier's software.
var editTops = []string{"etc", "opt", "srv", "home", "var", "mnt"}

// systemTops are the top-level directories of the system's own programs,
// libraries and kernel interfaces. Any other top-level directory (a
// /workspace, /data or /output of the task's) holds data and is treated
// as /srv is: in rootTops and editTops.
var systemTops = []string{"bin", "sbin", "lib", "lib32", "lib64", "libx32", "boot", "dev", "proc", "sys", "run", "usr", "etc", "snap"}

// rootTop and editTop say whether top, a top-level directory, is among
// rootTops or editTops, data directories included.
func rootTop(top string) bool {
	return slices.Contains(rootTops, top) || !slices.Contains(systemTops, top)
}

func editTop(top string) bool { return top != "usr" && rootTop(top) }

// protectedPaths are read by the dynamic loader, Python, OpenSSL, NSS,
// git or a shell at the start of the verifier's processes (an
// /etc/ld.so.preload, an openssl.cnf that loads a provider, an
// nsswitch.conf naming a new NSS module, Debian's sitecustomize in
// /etc/python3.11, the targets of /usr/bin's alternatives links): no
// root change touches them or anything below them.
var protectedPaths = []string{"etc/ld.so.preload", "etc/ld.so.conf", "etc/ld.so.conf.d", "etc/ld.so.cache",
	"etc/alternatives", "etc/python*", "etc/ssl", "etc/nsswitch.conf", "etc/gitconfig", "etc/pip.conf",
	"etc/profile", "etc/profile.d", "etc/bash.bashrc", "etc/environment", "etc/bindresvport.blacklist"}

// codeDirs are directory names whose existing contents are programs or
// modules wherever they are (a venv's bin/ and site-packages/ in /opt):
// Restore changes and deletes nothing below them that the image has.
var codeDirs = []string{"bin", "sbin", "libexec", "site-packages", "dist-packages", "node_modules"}

// maxRemoval bounds the image entries one deletion may remove: a larger
// tree is refused rather than walked.
const maxRemoval = 10000

// rootGuard decides which root entries of a layer Restore applies. It
// is taken before the first entry is applied, from the image as the
// restoring sandbox sees it: the commands on PATH and the Python modules
// on sys.path the image (verifier's layer included) provides.
type rootGuard struct {
	root *safeRoot
	// work is the image's WORKDIR relative to / when Restore applies
	// every change below it as it does in /app (openWork), else "".
	work     string
	commands map[string]bool
	modules  map[string]bool
	skipped  []string // the first maxSkipped refused names
	refused  int
}

// pyDirGlobs are the directories on a Debian python3's sys.path.
var pyDirGlobs = []string{"usr/lib/python3.*", "usr/lib/python3.*/lib-dynload", "usr/lib/python3.*/site-packages",
	"usr/lib/python3/dist-packages", "usr/local/lib/python3.*/dist-packages", "usr/local/lib/python3.*/site-packages"}

func newRootGuard(root *safeRoot, workDir string) (*rootGuard, error) {
	g := &rootGuard{root: root, work: openWork(workDir), commands: map[string]bool{}, modules: map[string]bool{}}
	for _, d := range pathDirs {
		names, err := g.list(d)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			g.commands[n] = true
		}
	}
	for _, pat := range pyDirGlobs {
		dirs, err := root.glob(pat)
		if err != nil && !isLinkErr(err) {
			return nil, err
		}
		for _, d := range dirs {
			names, err := g.list(d)
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				g.modules[moduleName(n)] = true
			}
		}
	}
	return g, nil
}

// openWork is the image's WORKDIR (a sandbox path) relative to /, when
// Restore treats it as a writable directory: the task's working
// directory, where Harbor keeps everything the agent did and tests run
// and compile. Not when it is / or lies under a system directory or
// /etc (a WORKDIR of /usr/local/bin stays under the rules for /usr), nor
// under a protected path; its tree then holds nothing the verifier's own
// tools run, since PATH and sys.path are the verifier's.
func openWork(workDir string) string {
	rel := strings.TrimPrefix(path.Clean("/"+workDir), "/")
	top, _, _ := strings.Cut(rel, "/")
	if rel == "" || !editTop(top) || top == "etc" || !placeable(rel, tar.TypeDir) {
		return ""
	}
	return rel
}

// inWork says whether name is the guard's open WORKDIR or below it.
func (g *rootGuard) inWork(name string) bool {
	return g.work != "" && (name == g.work || strings.HasPrefix(name, g.work+"/"))
}

// matchAny says whether name matches one of the patterns.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// sensitive says whether name is a directory of the verifier's PATH or
// of Python's sys.path, or a parent of one, whether the image has it or
// not.
func sensitive(name string) bool {
	for _, p := range append(slices.Clone(pathDirs), pyDirGlobs...) {
		for ; p != "."; p = path.Dir(p) {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
	}
	return false
}

// list reads directory d's names; a d that is absent, not a directory or
// a link (merged-/usr's /bin) lists nothing.
func (g *rootGuard) list(d string) ([]string, error) {
	f, err := g.root.openat("list", d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || isLinkErr(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func isLinkErr(err error) bool {
	var l errLink
	return errors.As(err, &l)
}

// moduleName is the importable name a module directory's entry stands
// for: pytest for pytest/, pytest.py, pytest-8.4.1.dist-info, _pytest
// for _pytest.cpython-311-x86_64-linux-gnu.so.
func moduleName(n string) string {
	for _, suf := range []string{".dist-info", ".egg-info"} {
		if s, ok := strings.CutSuffix(n, suf); ok {
			n, _, _ = strings.Cut(s, "-")
		}
	}
	n, _, _ = strings.Cut(n, ".")
	return strings.ToLower(strings.ReplaceAll(n, "-", "_"))
}

// rootVerdict is what Restore does with a root entry.
type rootVerdict int

const (
	rootApply   rootVerdict = iota
	rootPresent             // a directory the image has: nothing to do
	rootRefused
)

// admit says what Restore does with the root entry name (a layer entry
// below /, of tar type typ, mode mode), recording what it refuses.
// Applied are:
//
//   - additions (a name the image lacks) under rootTops that shadow none
//     of the verifier's tools: no command on PATH the image already has
//     (a /usr/local/bin/pytest ahead of /usr/bin's), no Python module the
//     image already has (a pytest/ in /usr/local/lib/python3.11/dist-packages
//     ahead of Debian's), no .pth file or sitecustomize in any
//     site-packages or dist-packages directory (code Python runs at
//     start-up), no link where PATH or sys.path look;
//   - edits and replacements of what the image holds under editTops: a
//     file or link that is not a program (no execute bit, no shared
//     library, not below a codeDirs directory, not hard-linked) replaced
//     by a file without an execute bit, a link or a directory;
//   - every change below the image's WORKDIR (openWork), as in /app;
//   - nothing in protectedPaths, and nothing directly in /.
//
// rootTops and editTops include every top-level directory that is not
// the system's (systemTops). Deletions go through admitRemoval.
func (g *rootGuard) admit(name string, typ byte, mode fs.FileMode) rootVerdict {
	v := g.check(name, typ, mode)
	if v == rootRefused {
		g.skip(name)
	}
	return v
}

// admitRemoval says whether Restore removes target (a whiteout entry)
// or, with opaque, target's contents, from the image; entry is the
// layer entry, recorded when refused. A removal applies under editTops
// when everything it removes could be edited (admit), and is a no-op
// where the image has nothing.
func (g *rootGuard) admitRemoval(entry, target string, opaque bool) rootVerdict {
	v := g.checkRemoval(target, opaque)
	if v == rootRefused {
		g.skip(entry)
	}
	return v
}

func (g *rootGuard) skip(name string) {
	if len(g.skipped) < maxSkipped {
		g.skipped = append(g.skipped, name)
	}
	g.refused++
}

// maxSkipped bounds the refused names a restore remembers.
const maxSkipped = 1000

// placeable says whether a root change may touch name at all: under
// rootTops, nothing directly in / but directories, nothing protected.
func placeable(name string, typ byte) bool {
	top, _, nested := strings.Cut(name, "/")
	if !nested && typ != tar.TypeDir || !rootTop(top) {
		return false
	}
	for _, p := range protectedPaths {
		for d := name; d != "."; d = path.Dir(d) {
			if ok, _ := path.Match(p, d); ok {
				return false
			}
		}
	}
	return true
}

// editable says whether the image's entry at name (fi) may be changed
// or removed: under editTops, placeable, not below a codeDirs directory, and not a
// program (execute bit, shared library) or a hard link (whose other
// names a change would reach).
func editable(name string, fi fs.FileInfo) bool {
	top, _, _ := strings.Cut(name, "/")
	if !editTop(top) || !placeable(name, tar.TypeDir) || sensitive(name) {
		return false
	}
	for _, c := range strings.Split(path.Dir(name), "/") {
		if slices.Contains(codeDirs, c) {
			return false
		}
	}
	if fi.IsDir() {
		return !slices.Contains(codeDirs, path.Base(name))
	}
	if fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 || isSharedLib(path.Base(name)) {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 && !fi.IsDir() {
		return false
	}
	return fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0
}

// isSharedLib says whether base names a shared library (libx.so,
// libx.so.1.2).
func isSharedLib(base string) bool {
	return strings.HasSuffix(base, ".so") || strings.Contains(base, ".so.")
}

func (g *rootGuard) check(name string, typ byte, mode fs.FileMode) rootVerdict {
	if !placeable(name, typ) {
		return rootRefused
	}
	if g.inWork(name) {
		if fi, err := g.root.Lstat(name); err == nil && fi.IsDir() && typ == tar.TypeDir {
			return rootPresent
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return rootRefused
		}
		return rootApply
	}
	dir, base := path.Dir(name), path.Base(name)
	if slices.Contains(pathDirs, dir) && g.commands[base] {
		return rootRefused
	}
	if typ != tar.TypeDir && sensitive(name) {
		// A link there would put a directory of the sandbox's own on
		// PATH or sys.path, where nothing below is checked.
		return rootRefused
	}
	for d := dir; d != "."; d = path.Dir(d) {
		if b := path.Base(d); b != "site-packages" && b != "dist-packages" && !matchAny(pyDirGlobs, d) {
			continue
		}
		// The entry's first component below the innermost module
		// directory is the module it belongs to.
		first, _, _ := strings.Cut(strings.TrimPrefix(name, d+"/"), "/")
		m := moduleName(first)
		if strings.HasSuffix(first, ".pth") || m == "sitecustomize" || m == "usercustomize" || matchAny(pyDirGlobs, d) && g.modules[m] {
			return rootRefused
		}
		break
	}
	fi, err := g.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return rootApply
	case err != nil:
		return rootRefused
	case fi.IsDir() && typ == tar.TypeDir:
		return rootPresent
	}
	// A change to what the image holds.
	if typ == tar.TypeReg && mode.Perm()&0o111 != 0 {
		return rootRefused
	}
	if fi.IsDir() {
		// Replaced by a file or link: the directory's tree goes.
		return g.checkRemoval(name, false)
	}
	if !editable(name, fi) {
		return rootRefused
	}
	return rootApply
}

func (g *rootGuard) checkRemoval(target string, opaque bool) rootVerdict {
	if !placeable(target, tar.TypeDir) {
		return rootRefused
	}
	if g.inWork(target) {
		if _, err := g.root.Lstat(target); errors.Is(err, fs.ErrNotExist) {
			return rootPresent
		} else if err != nil {
			return rootRefused
		}
		return rootApply
	}
	for _, d := range writableDirs {
		// The image's mount point of a writable directory (var/tmp)
		// stays, as the directory itself does.
		if d = strings.TrimPrefix(d, "/"); d == target || strings.HasPrefix(d, target+"/") {
			return rootRefused
		}
	}
	fi, err := g.root.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return rootPresent
	case err != nil:
		return rootRefused
	}
	if !opaque && !editable(target, fi) {
		return rootRefused
	}
	if !fi.IsDir() {
		if opaque {
			return rootPresent
		}
		return rootApply
	}
	n := 0
	ok := true
	err = g.root.walk(target, func(name string, info fs.FileInfo) error {
		if name == target {
			return nil
		}
		if n++; n > maxRemoval || !editable(name, info) {
			ok = false
			return fs.SkipAll
		}
		return nil
	})
	if err != nil || !ok {
		return rootRefused
	}
	if opaque && n == 0 {
		// Nothing to hide: a directory the layer has just made
		// (fuse-overlayfs marks the directories it creates opaque).
		return rootPresent
	}
	return rootApply
}

// rootTarget opens the sandbox's root (the merged overlay, or the copy)
// for Restore, with the guard taken from it before anything is applied.
func (b *box) rootTarget() (*box, *rootGuard, error) {
	top, err := openSafeRoot(b.root)
	if err != nil {
		return nil, nil, err
	}
	defer top.Close()
	r, err := top.OpenRoot("rootfs")
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: restore: the image root: %w", err)
	}
	g, err := newRootGuard(r, b.workDir)
	if err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("sandbox: restore: the image root: %w", err)
	}
	return &box{fsRoot: r, uid: b.uid, gid: b.gid, ids: b.ids, limits: b.limits, anywhere: true}, g, nil
}

// RestoreNote begins the note in Info().Notes that says which changes
// outside the writable directories Restore did not apply.
const RestoreNote = "restore: "

// noteSkipped says in Info().Notes which root changes Restore refused.
func (b *box) noteSkipped(names []string, n int) {
	if n == 0 {
		return
	}
	shown := names
	if len(shown) > 10 {
		shown = shown[:10]
	}
	more := ""
	if n > len(shown) {
		more = fmt.Sprintf(" and %d more", n-len(shown))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notes = append(b.notes, fmt.Sprintf(RestoreNote+"%d changes outside the writable directories not applied (applied are every change below the image's WORKDIR, additions under /%s and other data directories that shadow no command on PATH or Python module the image has, no .pth or sitecustomize, and edits and deletions under /%s and other data directories of files that are not programs, libraries or modules; never the loader's, Python's, OpenSSL's, NSS's or a shell's start-up configuration): /%s%s",
		n, strings.Join(rootTops, ", /"), strings.Join(editTops, ", /"), strings.Join(shown, ", /"), more))
}

// pytestPlugin says whether an entry_points.txt declares a pytest
// plugin, which pytest would load into the verifier's run unasked.
func pytestPlugin(data []byte) bool { return bytes.Contains(data, []byte("pytest11")) }

// maxEntryPoints bounds the entry_points.txt Restore reads to check.
const maxEntryPoints = 1 << 20

// readEntryPoints reads an entry_points.txt entry whole (bounded), so
// that it can be checked before it is written.
func readEntryPoints(r io.Reader, size int64) ([]byte, bool) {
	if size > maxEntryPoints {
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(r, size))
	return data, err == nil
}
