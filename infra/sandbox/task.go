package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// start builds a sandbox: directories, the task's environment, then the
// snapshot baseline.
func start(ctx context.Context, l launcher, spec Spec, uid, gid int, release func()) (Sandbox, error) {
	b, err := newBox(l, spec, uid, gid)
	if err != nil {
		if release != nil {
			release()
		}
		return nil, err
	}
	b.release = release
	if spec.Image != nil {
		if err := b.mountImage(ctx, spec.Image); err != nil {
			b.Close()
			return nil, err
		}
	}
	if spec.TaskDir != "" {
		if err := b.build(ctx, spec); err != nil {
			b.Close()
			return nil, err
		}
	}
	if spec.WorkDir != "" {
		b.workDir = spec.WorkDir
	}
	if b.base, err = b.scan(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// maxDockerfile bounds the Dockerfile read.
const maxDockerfile = 1 << 20

// supported lists what the Dockerfile subset covers, for error messages.
const supported = "supported: FROM (ignored), ARG, ENV, WORKDIR, COPY/ADD of local files, RUN; ignored: EXPOSE, LABEL, MAINTAINER, STOPSIGNAL, HEALTHCHECK, CMD, ENTRYPOINT, VOLUME, USER root"

// build prepares the task's environment: environment/Dockerfile when
// present, else environment/setup.sh when present, else nothing. The task
// directory is the caller's choice; below it nothing is read through a
// link (environment/ a link to a host directory, a Dockerfile linked to a
// host file, COPY h/secret with h a link), so every entry point, not
// only a caller that checked the task first, reads the task's own files
// and nothing else.
func (b *box) build(ctx context.Context, spec Spec) error {
	dir, err := filepath.EvalSymlinks(spec.TaskDir)
	if err != nil {
		return fmt.Errorf("sandbox: task directory: %w", err)
	}
	task, err := openSafeRoot(dir)
	if err != nil {
		return fmt.Errorf("sandbox: task directory %s: %w", spec.TaskDir, err)
	}
	defer task.Close()
	envDir := filepath.Join(spec.TaskDir, "environment")
	env, err := task.OpenRoot("environment")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", envDir, err)
	}
	defer env.Close()
	if _, err := env.Lstat("Dockerfile"); err == nil {
		return b.buildDockerfile(ctx, env, envDir, spec)
	}
	if _, err := env.Lstat("setup.sh"); err == nil {
		return b.runSetup(ctx, env, envDir)
	}
	return nil
}

// buildDir is where setup.sh's build context is copied for the duration of
// the setup.
const buildDir = "/tmp/t1-build"

// runSetup copies environment/ to /tmp/t1-build and runs setup.sh there
// as root, then removes the copy.
func (b *box) runSetup(ctx context.Context, env *safeRoot, envDir string) error {
	rel, _ := b.rel(buildDir)
	if err := b.copyInto(ctx, env, ".", rel); err != nil {
		return err
	}
	res, err := b.Exec(ctx, Cmd{Args: []string{"/bin/bash", b.l.visible(b, buildDir+"/setup.sh")}, Dir: buildDir})
	if rerr := b.fsRoot.RemoveAll(rel); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("sandbox: %s/setup.sh: %w", envDir, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("sandbox: %s/setup.sh failed with exit code %d%s\n%s%s", envDir, res.ExitCode, timedOut(res), res.Stdout, res.Stderr)
	}
	return nil
}

func timedOut(r Result) string {
	if r.TimedOut {
		return " (timed out)"
	}
	return ""
}

// buildDockerfile executes the subset of a Dockerfile that maps onto the
// host (see supported).
func (b *box) buildDockerfile(ctx context.Context, env *safeRoot, envDir string, spec Spec) error {
	file := filepath.Join(envDir, "Dockerfile")
	data, err := env.ReadFile("Dockerfile", maxDockerfile)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", file, err)
	}
	ins, err := ParseDockerfile(file, data)
	if err != nil {
		return err
	}
	// ARG and ENV values, for substitution; $PATH starts as commands see it.
	vars := map[string]string{"PATH": defaultPath}
	var envList []string // ENV in order, for commands
	var argList []string // ARG values, for RUN only
	workdir := "/"
	froms := 0
	for _, in := range ins {
		fail := func(format string, a ...any) error {
			return &DockerfileError{File: file, Line: in.Line, Msg: fmt.Sprintf(format, a...)}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		switch in.Cmd {
		case "FROM":
			froms++
			if froms > 1 {
				return fail("a second FROM (multi-stage build) is built on an image (sandbox.image: dockerfile), not on the host's directories; %s", supported)
			}
			image := ""
			if len(in.Args) > 0 {
				image = in.Args[0]
			}
			alias, err := b.aliasFrom(image)
			if err != nil {
				return err
			}
			vars["PATH"] = b.aliasPath()
			note := fmt.Sprintf("%s:%d: FROM %s ignored: %s%s", file, in.Line, image, b.rootNote(), alias)
			b.notes = append(b.notes, note)
			slog.Debug("sandbox: " + note)
		case "ARG":
			for _, w := range in.Args {
				k, v, hasV := strings.Cut(w, "=")
				if hasV {
					uv, err := unquote(v, vars)
					if err != nil {
						return fail("ARG: %v", err)
					}
					v = uv
				}
				if _, set := vars[k]; !set || hasV {
					vars[k] = v
					argList = mergeEnv(argList, []string{k + "=" + v})
				}
			}
		case "ENV":
			pairs, err := envPairs(in, vars)
			if err != nil {
				return fail("ENV: %v", err)
			}
			for _, p := range pairs {
				k, v, _ := strings.Cut(p, "=")
				vars[k] = v
			}
			envList = mergeEnv(envList, pairs)
		case "WORKDIR":
			d, err := unquote(in.Raw, vars)
			if err != nil {
				return fail("WORKDIR: %v", err)
			}
			if !path.IsAbs(d) {
				d = path.Join(workdir, d)
			}
			rel, err := b.rel(d)
			if err != nil {
				return fail("WORKDIR %s: only directories under %s can be written here; others need a container backend", d, strings.Join(writableDirs, ", "))
			}
			if err := b.mkdirAll(rel); err != nil {
				return fail("WORKDIR %s: %v", d, err)
			}
			workdir = path.Clean(d)
		case "COPY", "ADD":
			if err := b.dockerCopy(ctx, in, env, envDir, workdir, vars); err != nil {
				return fail("%v", err)
			}
		case "RUN":
			c := Cmd{Dir: workdir, Env: mergeEnv(argList, envList, envMap(spec.Env))}
			if in.JSON {
				c.Args = in.Args
			} else {
				c.Args = []string{"/bin/sh", "-c", in.Raw}
			}
			if len(c.Args) == 0 {
				return fail("RUN without a command")
			}
			if b.l.name() == "process" && workdir == "/" {
				c.Dir = "/app"
			}
			res, err := b.Exec(ctx, c)
			if err != nil {
				return fail("RUN %s: %v", in.Raw, err)
			}
			if res.ExitCode != 0 {
				hint := ""
				switch {
				case !installs(in.Raw, jsonArgs(in)):
				case b.proxy != nil:
					hint = " (the sandbox reaches only " + strings.Join(b.proxy.Hosts(), ", ") + ", through t1's proxy; the host's system directories are read-only)"
				default:
					hint = " (the sandbox has no network: package installs fail here)"
				}
				return fail("RUN %s: exit code %d%s%s\n%s%s", in.Raw, res.ExitCode, timedOut(res), hint, res.Stdout, res.Stderr)
			}
		case "USER":
			u, _ := unquote(in.Raw, vars)
			name, _, _ := strings.Cut(u, ":")
			if name != "root" && name != "0" {
				return fail("USER %s: the sandbox runs commands as root; another user needs a container backend", u)
			}
		case "EXPOSE", "LABEL", "MAINTAINER", "STOPSIGNAL", "HEALTHCHECK", "CMD", "ENTRYPOINT", "VOLUME":
			slog.Debug("sandbox: Dockerfile instruction ignored", "file", file, "line", in.Line, "instruction", in.Cmd)
		default:
			return fail("%s needs a container backend; %s", in.Cmd, supported)
		}
	}
	b.env = mergeEnv(envList, b.env)
	if workdir != "/" {
		b.workDir = workdir
	}
	return nil
}

// jsonArgs is the exec form's argv, nil for the shell form.
func jsonArgs(in Instruction) []string {
	if in.JSON {
		return in.Args
	}
	return nil
}

func envMap(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// envPairs reads "ENV K=V K2=V2" or the legacy "ENV K V W".
func envPairs(in Instruction, vars map[string]string) ([]string, error) {
	if len(in.Args) == 0 {
		return nil, errors.New("no variable")
	}
	if !strings.Contains(in.Args[0], "=") {
		k := in.Args[0]
		v := strings.TrimSpace(strings.TrimPrefix(in.Raw, k))
		uv, err := unquote(v, vars)
		if err != nil {
			return nil, err
		}
		if !validName(k) {
			return nil, fmt.Errorf("bad variable name %q", k)
		}
		return []string{k + "=" + uv}, nil
	}
	var out []string
	local := map[string]string{}
	for k, v := range vars {
		local[k] = v
	}
	for _, w := range in.Args {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want NAME=value", w)
		}
		if !validName(k) {
			return nil, fmt.Errorf("bad variable name %q", k)
		}
		uv, err := unquote(v, local)
		if err != nil {
			return nil, err
		}
		out = append(out, k+"="+uv)
	}
	return out, nil
}

func validName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

var archiveExts = []string{".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst"}

// dockerCopy runs COPY or ADD from the build context envDir.
func (b *box) dockerCopy(ctx context.Context, in Instruction, env *safeRoot, envDir, workdir string, vars map[string]string) error {
	var chmod fs.FileMode
	for _, f := range in.Flags {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "--chown", "--link":
			// Every sandbox file belongs to the sandbox's single user.
		case "--chmod":
			m, err := strconv.ParseUint(v, 8, 32)
			if err != nil || m > 0o7777 {
				return fmt.Errorf("%s %s: want an octal mode", in.Cmd, f)
			}
			chmod = fs.FileMode(m).Perm()
		case "--from":
			return fmt.Errorf("%s %s: copying from another image or stage is built on an image (sandbox.image: dockerfile), not on the host's directories", in.Cmd, f)
		default:
			return fmt.Errorf("%s %s: option needs a container backend; %s", in.Cmd, f, supported)
		}
	}
	var words []string
	for _, a := range in.Args {
		if in.JSON {
			words = append(words, a)
			continue
		}
		u, err := unquote(a, vars)
		if err != nil {
			return fmt.Errorf("%s: %v", in.Cmd, err)
		}
		words = append(words, u)
	}
	if len(words) < 2 {
		return fmt.Errorf("%s needs at least one source and a destination", in.Cmd)
	}
	dest := words[len(words)-1]
	srcs := words[:len(words)-1]
	destDir := strings.HasSuffix(dest, "/") || len(srcs) > 1
	if !path.IsAbs(dest) {
		dest = path.Join(workdir, dest)
	}
	destRel, err := b.rel(dest)
	if err != nil {
		return fmt.Errorf("%s to %s: only directories under %s can be written here; others need a container backend", in.Cmd, dest, strings.Join(writableDirs, ", "))
	}
	if fi, err := b.fsRoot.Stat(destRel); err == nil && fi.IsDir() {
		destDir = true
	}
	var matches []string
	for _, s := range srcs {
		if in.Cmd == "ADD" {
			if strings.Contains(s, "://") {
				return fmt.Errorf("ADD %s: fetching URLs needs network and a container backend", s)
			}
			for _, e := range archiveExts {
				if strings.HasSuffix(strings.ToLower(s), e) {
					return fmt.Errorf("ADD %s: unpacking archives needs a container backend (use COPY and RUN tar)", s)
				}
			}
		}
		pat := path.Clean(s)
		if pat == ".." || strings.HasPrefix(pat, "../") {
			return fmt.Errorf("%s %s: outside the build context %s", in.Cmd, s, envDir)
		}
		if pat = strings.TrimPrefix(pat, "/"); pat == "" {
			pat = "."
		}
		m, err := env.glob(pat)
		if err != nil {
			return fmt.Errorf("%s %s: %v", in.Cmd, s, err)
		}
		if len(m) == 0 {
			return fmt.Errorf("%s %s: not found in the build context %s", in.Cmd, s, envDir)
		}
		matches = append(matches, m...)
	}
	if len(matches) > 1 {
		destDir = true
	}
	for _, m := range matches {
		fi, err := env.Lstat(m)
		if err != nil {
			return fmt.Errorf("%s: %v", in.Cmd, err)
		}
		target := destRel
		if !fi.IsDir() && destDir {
			target = path.Join(destRel, path.Base(m))
		}
		if err := b.copyInto(ctx, env, m, target); err != nil {
			return err
		}
		if chmod != 0 {
			if err := b.chmodTree(target, chmod); err != nil {
				return err
			}
		}
	}
	return nil
}

// mkdirAll creates rel (relative to the fs directory) and its missing
// parents, owned by the sandbox user.
func (b *box) mkdirAll(rel string) error {
	if err := b.ensureParent(rel + "/x"); err != nil {
		return err
	}
	return nil
}

func (b *box) chmodTree(rel string, mode fs.FileMode) error {
	return b.fsRoot.walk(rel, func(p string, info fs.FileInfo) error {
		if info.Mode()&fs.ModeSymlink != 0 {
			return nil
		}
		return b.fsRoot.Chmod(p, mode)
	})
}
