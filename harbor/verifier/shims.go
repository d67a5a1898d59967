package verifier

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/t1pipe/t1/harbor"
)

//go:embed shims/t1-shim shims/t1_ctrf.py shims/t1-python shims/t1-interp
var shimFiles embed.FS

// InterpreterGuard is the name, in ShimDir, of the stand-in for the
// image's Python interpreter files (WriteInterpreterGuard), which the
// verifier binds over each of them for test.sh's command
// (sandbox.Cmd.StandIns).
const InterpreterGuard = "t1-interp"

// interpreterName matches the names of Python interpreters on PATH that
// InterpreterGuard stands in for: python, python3, python3.11.
var interpreterName = regexp.MustCompile(`^python(3(\.[0-9]+)?)?$`)

// IsInterpreter says whether the program at p is named as a Python
// interpreter the guard stands in for.
func IsInterpreter(p string) bool { return interpreterName.MatchString(path.Base(p)) }

// WriteInterpreterGuard writes InterpreterGuard into the host directory
// dir, to be uploaded as ShimDir; originals is where the sandbox keeps
// the interpreters it replaces (sandbox.OriginalsDir).
func WriteInterpreterGuard(dir, originals string) error {
	script, err := shimFiles.ReadFile("shims/t1-interp")
	if err != nil {
		return err
	}
	script = bytes.ReplaceAll(script, []byte("@ORIGINALS@"), []byte(originals))
	if err := os.WriteFile(filepath.Join(dir, InterpreterGuard), script, 0o755); err != nil {
		return fmt.Errorf("verifier guards: %w", err)
	}
	return nil
}

// ShimDir is where the verifier's sandbox holds its own commands, first on
// test.sh's PATH: the stand-ins for network installers (WriteShims) when it
// runs offline, else the python3 guard (WriteGuards). It lies beside Home, under the directory the
// verifier empties before it runs, so whatever the agent left there is
// gone and the stand-ins are the verifier's own.
const ShimDir = "/tmp/t1-verifier/shims"

// shimNames are the commands the stand-ins answer. python3 is among them
// so that `python3 -m pip install` and `python3 -m pytest --ctrf` work;
// every other python3 call goes straight to the image's interpreter.
var shimNames = []string{"apt", "apt-get", "curl", "wget", "pip", "pip3", "pytest", "py.test", "python3", "uv", "uvx"}

// WriteShims writes the stand-ins into the host directory dir, to be
// uploaded as ShimDir: one script under each tool's name, and the CTRF
// plugin its pytest loads when pytest-json-ctrf is not installed. python
// adds `python` (for images that provide it as python3).
func WriteShims(dir string, python bool) error {
	script, err := shimFiles.ReadFile("shims/t1-shim")
	if err != nil {
		return err
	}
	// The real tools are looked for where the verifier's PATH has them.
	script = bytes.ReplaceAll(script, []byte("@PATH@"), []byte(Path))
	plugin, err := shimFiles.ReadFile("shims/t1_ctrf.py")
	if err != nil {
		return err
	}
	names := slices.Clone(shimNames)
	if python {
		names = append(names, "python")
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), script, 0o755); err != nil {
			return fmt.Errorf("verifier shims: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "t1_ctrf.py"), plugin, 0o644); err != nil {
		return fmt.Errorf("verifier shims: %w", err)
	}
	return nil
}

// WriteGuards writes, into the host directory dir to be uploaded as
// ShimDir, what a verifier that runs without the offline stand-ins puts
// first on PATH: python3 and python, which run `-m pytest` with the
// working directory (the image's WORKDIR, the agent's) off sys.path (-P,
// or -I before Python 3.11) so that it cannot shadow pytest, and are the
// image's interpreter otherwise. python says
// the sandbox provides python as python3 (a python:* image's alias).
func WriteGuards(dir string, python bool) error {
	script, err := shimFiles.ReadFile("shims/t1-python")
	if err != nil {
		return err
	}
	alias := "0"
	if python {
		alias = "1"
	}
	script = bytes.ReplaceAll(script, []byte("@PATH@"), []byte(Path))
	script = bytes.ReplaceAll(script, []byte("@ALIAS@"), []byte(alias))
	for _, n := range []string{"python3", "python"} {
		if err := os.WriteFile(filepath.Join(dir, n), script, 0o755); err != nil {
			return fmt.Errorf("verifier guards: %w", err)
		}
	}
	return nil
}

// TestEnv is Env with the verifier's own commands at shimDir (ShimDir as
// commands see it) first on PATH: test.sh's environment.
func TestEnv(t *harbor.Task, home, shimDir string) []string {
	return append(Env(t, home), "PATH="+shimDir+":"+Path)
}
