package sandbox

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// standInArgs binds, for one command, each stand-in over the program it
// replaces and the program itself below OriginalsDir (Cmd.StandIns). Both
// are bound by descriptors opened here: the program resolved within the
// sandbox's root, so that a link (an image's /usr/bin/python3 ->
// python3.11) leads no higher than it, and the stand-in beneath the
// writable directories with no link followed. The stand-in goes over the
// resolved file, so every name of the program runs it. files are the
// command's extra files so far (fd 3 on).
func (b *box) standInArgs(files []*os.File, standIns map[string]string) ([]string, []*os.File, error) {
	if len(standIns) == 0 {
		return nil, files, nil
	}
	root, rootPath := (*os.File)(nil), "/"
	if b.image != nil {
		root, rootPath = b.image.f, b.image.dir
	} else {
		f, err := os.OpenFile("/", unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, files, fmt.Errorf("sandbox: stand-ins: %w", err)
		}
		defer f.Close()
		root = f
	}
	progs := make([]string, 0, len(standIns))
	for p := range standIns {
		progs = append(progs, p)
	}
	sort.Strings(progs)
	own := len(files)
	fail := func(err error) ([]string, []*os.File, error) {
		closeFiles(files[own:])
		return nil, files[:own], err
	}
	var args []string
	bound := map[string]bool{}
	for _, prog := range progs {
		if !path.IsAbs(prog) {
			return fail(fmt.Errorf("sandbox: stand-in for %q: not an absolute path", prog))
		}
		orig, final, err := resolveIn(root, rootPath, prog)
		if err != nil {
			return fail(fmt.Errorf("sandbox: stand-in for %s: %w", prog, err))
		}
		if bound[final] {
			orig.Close()
			continue
		}
		bound[final] = true
		rel, err := b.rel(standIns[prog])
		if err != nil {
			orig.Close()
			return fail(err)
		}
		sub, err := b.fsRoot.openat("open", rel, unix.O_PATH|unix.O_NOFOLLOW, 0)
		if err != nil {
			orig.Close()
			return fail(fmt.Errorf("sandbox: stand-in for %s: %w", prog, err))
		}
		if fi, err := sub.Stat(); err != nil || !fi.Mode().IsRegular() {
			orig.Close()
			sub.Close()
			return fail(fmt.Errorf("sandbox: stand-in for %s: %s is not a regular file", prog, standIns[prog]))
		}
		args = append(args, "--ro-bind-fd", strconv.Itoa(3+len(files)), OriginalsDir+final)
		files = append(files, orig)
		args = append(args, "--ro-bind-fd", strconv.Itoa(3+len(files)), final)
		files = append(files, sub)
	}
	return args, files, nil
}

// resolveIn opens the regular file at the absolute sandbox path p, links
// followed as if root (rootPath on the host) were /, and says where it
// resolved to, as a sandbox path.
func resolveIn(root *os.File, rootPath, p string) (*os.File, string, error) {
	fd, err := unix.Openat2(int(root.Fd()), strings.TrimPrefix(path.Clean(p), "/"), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, "", err
	}
	f := os.NewFile(uintptr(fd), p)
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, "", fmt.Errorf("not a regular file (%v)", err)
	}
	host, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		f.Close()
		return nil, "", err
	}
	rel, err := filepath.Rel(rootPath, host)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		f.Close()
		return nil, "", fmt.Errorf("resolved to %s, outside the sandbox's root", host)
	}
	return f, "/" + filepath.ToSlash(rel), nil
}
