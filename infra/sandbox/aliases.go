package sandbox

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// aliasDir is the directory of command aliases under ctl/, first on the
// sandbox's PATH when it holds any.
const aliasDir = "bin"

// defaultPath is the PATH every sandbox command starts with.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hostPython is the interpreter a `python` alias runs.
const hostPython = "/usr/bin/python3"

// aliasFrom provides what the FROM image would have that the sandbox's
// root (the host's system directories, or an image) may lack: the
// python:* images' `python`, which is their python3. The alias lives in
// ctl/bin (read-only inside, outside the snapshot) and is reported in
// Info().Aliases; what it says is returned for the FROM line's note.
func (b *box) aliasFrom(image string) (string, error) {
	name := strings.ToLower(path.Base(image))
	if !strings.HasPrefix(name, "python:") && name != "python" {
		return "", nil
	}
	whose := "the host's"
	if b.image != nil {
		whose = "the image's"
	}
	if b.rootHas("/usr/bin/python") {
		return "", nil
	}
	if !b.rootHas(hostPython) {
		return "; " + whose + " root has no " + hostPython + ", so there is no python", nil
	}
	if _, err := b.ctlRoot.Lstat(aliasDir); err != nil {
		if err := b.ctlRoot.Mkdir(aliasDir, 0o755); err != nil {
			return "", fmt.Errorf("sandbox: alias directory: %w", err)
		}
	}
	if err := b.ctlRoot.Symlink(hostPython, aliasDir+"/python"); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("sandbox: python alias: %w", err)
	}
	if b.aliases == nil {
		b.aliases = map[string]string{}
	}
	b.aliases["python"] = hostPython
	return "; python runs " + whose + " " + hostPython, nil
}

// rootHas reports whether the sandbox's root holds p, links followed as
// commands inside would follow them: the host's for host directories, the
// mounted image's (resolved within it) for an image root.
func (b *box) rootHas(p string) bool {
	if b.image == nil {
		_, err := os.Stat(p)
		return err == nil
	}
	fd, err := unix.Openat2(int(b.image.f.Fd()), strings.TrimPrefix(p, "/"), &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// rootNote says what the sandbox's root is, for the FROM line's note.
func (b *box) rootNote() string {
	if b.image == nil {
		return "the sandbox runs on the host's system directories"
	}
	return fmt.Sprintf("the sandbox runs on its image (%d layers), not on the host's system directories", b.image.layers)
}

// aliasPath is the PATH with the alias directory first, as commands see
// it, when there are aliases; else defaultPath.
func (b *box) aliasPath() string {
	if len(b.aliases) == 0 {
		return defaultPath
	}
	dir := filepath.Join(b.ctlDir, aliasDir)
	if b.l.name() == "bwrap" {
		dir = shellCtl + "/" + aliasDir
	}
	return dir + ":" + defaultPath
}
