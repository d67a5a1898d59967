package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/infra/sandbox"
)

// Options configure a build.
type Options struct {
	// CacheDir holds the layers, one directory per key; empty means
	// <user cache dir>/t1/images.
	CacheDir string
	// Base is the Debian base; zero means HostBase.
	Base Base
	// StepTimeout bounds each RUN step and the debootstrap of the base;
	// zero means 30 minutes.
	StepTimeout time.Duration
	// Log receives the output of debootstrap and of every RUN, and a
	// line for each request of a RUN through the registries proxy; nil
	// discards it.
	Log io.Writer
	// Registries is the allow-list of the proxy through which RUN steps
	// reach the network (infra/egress); empty means DefaultRegistries.
	Registries []string
}

// Step is one Dockerfile step of a build.
type Step struct {
	// Instruction is the step as written ("RUN apt-get install -y sl"),
	// or "debootstrap …" for the base.
	Instruction string `json:"instruction"`
	Line        int    `json:"line,omitempty"`
	// Key is the layer's content address: a hash of the parent's key, the
	// instruction, the ARG and ENV values in force and, for COPY and ADD,
	// the build context's contents. Empty for steps that change no file
	// (ENV, ARG, LABEL…).
	Key string `json:"key,omitempty"`
	// Cached says the layer was already in the cache.
	Cached   bool          `json:"cached"`
	Size     int64         `json:"size"` // bytes of the layer's files
	Duration time.Duration `json:"duration_ns"`
}

// Result is a built image.
type Result struct {
	Image *sandbox.Image `json:"image"`
	// Keys are the keys of Image.Layers, in order. In a multi-stage
	// build they are the last stage's alone, where Steps has every
	// stage's.
	Keys  []string `json:"keys"`
	Steps []Step   `json:"steps"`
	// Mapping says what the Dockerfile's FROM became.
	Mapping string `json:"mapping"`
	Size    int64  `json:"size"`
	// Egress is every request the RUN steps built here (not the cached
	// ones) made through the registries proxy.
	Egress []egress.Request `json:"egress,omitempty"`
}

// Layers are the steps that have a layer.
func (r *Result) Layers() []Step {
	var out []Step
	for _, s := range r.Steps {
		if s.Key != "" {
			out = append(out, s)
		}
	}
	return out
}

// DefaultCacheDir is where layers are kept when Options.CacheDir is empty.
func DefaultCacheDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "t1", "images")
}

// Build turns taskDir/environment/Dockerfile into an image (see the
// package documentation).
func Build(ctx context.Context, taskDir string, opt Options) (*Result, error) {
	opt, err := defaults(opt)
	if err != nil {
		return nil, err
	}
	envDir := filepath.Join(taskDir, "environment")
	file := filepath.Join(envDir, "Dockerfile")
	if fi, err := os.Lstat(envDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("image: %s: no environment directory (an image is built from environment/Dockerfile)", taskDir)
	}
	if fi, err := os.Lstat(file); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("image: %s: no Dockerfile (a regular file, not a link)", file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	ins, err := sandbox.ParseDockerfile(file, data)
	if err != nil {
		return nil, err
	}
	c, err := openCache(opt.CacheDir)
	if err != nil {
		return nil, err
	}
	defer c.close()
	b := &builder{opt: opt, cache: c, file: file, envDir: envDir, vars: map[string]string{}, workdir: "/"}
	return b.run(ctx, ins)
}

// defaults fills in the options' zero fields.
func defaults(opt Options) (Options, error) {
	if opt.CacheDir == "" {
		opt.CacheDir = DefaultCacheDir()
	}
	if opt.StepTimeout <= 0 {
		opt.StepTimeout = 30 * time.Minute
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if opt.Base.Mirror == "" {
		b, err := HostBase("")
		if err != nil {
			return opt, err
		}
		opt.Base = b
	}
	if len(opt.Registries) == 0 {
		r, err := DefaultRegistries("")
		if err != nil {
			return opt, err
		}
		opt.Registries = r
	}
	if _, err := egress.New(opt.Registries); err != nil {
		return opt, fmt.Errorf("image: %w", err)
	}
	return opt, nil
}

type builder struct {
	opt     Options
	cache   *cache
	file    string
	envDir  string
	ctxHash string // the build context's content hash, computed on first COPY

	res     Result
	layers  []string // layer directories, lowest first
	keys    []string // their keys
	key     string   // the last layer's key
	vars    map[string]string
	envList []string
	argList []string
	workdir string

	// A multi-stage build: the stages already built, by position, what
	// the ARGs before the first FROM set, the current stage's name, and
	// notes on what the earlier stages' FROMs became.
	stages     []stage
	global     stageVars
	name       string
	stageNotes []string
}

// stage is a finished stage of a multi-stage build: COPY --from and a
// later FROM start from its filesystem, which its key names.
type stage struct {
	name    string
	layers  []string
	keys    []string
	key     string
	envList []string
	workdir string
}

type stageVars struct {
	vars    map[string]string
	argList []string
}

// fail is the one-line error of a step that cannot be built.
func (b *builder) fail(in sandbox.Instruction, format string, a ...any) error {
	return &sandbox.DockerfileError{File: b.file, Line: in.Line, Msg: fmt.Sprintf(format, a...)}
}

func (b *builder) run(ctx context.Context, ins []sandbox.Instruction) (*Result, error) {
	froms := 0
	for _, in := range ins {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		text := strings.Join(append(append([]string{in.Cmd}, in.Flags...), in.Raw), " ")
		text = strings.TrimSpace(text)
		if froms == 0 && in.Cmd != "FROM" && in.Cmd != "ARG" {
			return nil, b.fail(in, "%s before FROM", in.Cmd)
		}
		switch in.Cmd {
		case "FROM":
			if froms == 0 {
				// ARGs before the first FROM are every stage's start.
				b.global = stageVars{vars: copyVars(b.vars), argList: slices.Clone(b.argList)}
			} else {
				b.endStage()
			}
			froms++
			if err := b.from(ctx, in); err != nil {
				return nil, err
			}
		case "ARG":
			for _, w := range in.Args {
				k, v, hasV := strings.Cut(w, "=")
				if hasV {
					uv, err := sandbox.ExpandWord(v, b.vars)
					if err != nil {
						return nil, b.fail(in, "ARG: %v", err)
					}
					v = uv
				}
				if _, set := b.vars[k]; !set || hasV {
					b.vars[k] = v
					b.argList = merge(b.argList, k+"="+v)
				}
			}
			b.res.Steps = append(b.res.Steps, Step{Instruction: text, Line: in.Line})
		case "ENV":
			pairs, err := sandbox.EnvPairs(in, b.vars)
			if err != nil {
				return nil, b.fail(in, "ENV: %v", err)
			}
			for _, p := range pairs {
				k, v, _ := strings.Cut(p, "=")
				b.vars[k] = v
				b.envList = merge(b.envList, p)
			}
			b.res.Steps = append(b.res.Steps, Step{Instruction: text, Line: in.Line})
		case "WORKDIR":
			d, err := sandbox.ExpandWord(in.Raw, b.vars)
			if err != nil {
				return nil, b.fail(in, "WORKDIR: %v", err)
			}
			if !path.IsAbs(d) {
				d = path.Join(b.workdir, d)
			}
			d = path.Clean(d)
			if err := b.layer(ctx, in, text, "", func(r *sandbox.BuildRoot) error { return r.Mkdir(d) }); err != nil {
				return nil, err
			}
			b.workdir = d
		case "COPY", "ADD":
			if from, ok := fromFlag(in); ok {
				if err := b.copyFrom(ctx, in, text, from); err != nil {
					return nil, err
				}
				continue
			}
			for _, a := range in.Args {
				if in.Cmd == "ADD" && strings.Contains(a, "://") {
					return nil, b.fail(in, "ADD %s: fetching a URL at build time makes the image depend on that server; download it into environment/ and COPY it", a)
				}
			}
			h, err := b.contextHash()
			if err != nil {
				return nil, b.fail(in, "%s: %v", in.Cmd, err)
			}
			wd, vars := b.workdir, copyVars(b.vars)
			if err := b.layer(ctx, in, text, h, func(r *sandbox.BuildRoot) error {
				return r.Copy(ctx, in, b.envDir, wd, vars)
			}); err != nil {
				return nil, err
			}
		case "RUN":
			argv := []string{"/bin/sh", "-c", in.Raw}
			if in.JSON {
				argv = in.Args
			}
			if len(argv) == 0 {
				return nil, b.fail(in, "RUN without a command")
			}
			if err := b.runStep(ctx, in, text, argv); err != nil {
				return nil, err
			}
		case "USER":
			u, _ := sandbox.ExpandWord(in.Raw, b.vars)
			name, _, _ := strings.Cut(u, ":")
			if name != "root" && name != "0" {
				return nil, b.fail(in, "USER %s: the sandbox runs commands as root; another user cannot be built here", u)
			}
			b.res.Steps = append(b.res.Steps, Step{Instruction: text, Line: in.Line})
		case "EXPOSE", "LABEL", "MAINTAINER", "STOPSIGNAL", "HEALTHCHECK", "CMD", "ENTRYPOINT", "VOLUME":
			b.res.Steps = append(b.res.Steps, Step{Instruction: text, Line: in.Line})
		default:
			return nil, b.fail(in, "%s cannot be built here (supported: FROM ubuntu|debian|python, ARG, ENV, WORKDIR, COPY, ADD of local files, RUN, USER root)", in.Cmd)
		}
	}
	if froms == 0 {
		return nil, fmt.Errorf("image: %s: no FROM", b.file)
	}
	img := &sandbox.Image{Layers: b.layers, Env: b.envList, Notes: append([]string{b.res.Mapping}, b.stageNotes...)}
	b.res.Keys = b.keys
	if b.workdir != "/" {
		img.WorkDir = b.workdir
	}
	b.res.Image = img
	for _, s := range b.res.Steps {
		b.res.Size += s.Size
	}
	return &b.res, nil
}

// from starts a stage: FROM image [AS name], the image one the base maps
// (mapFrom) or an earlier stage.
func (b *builder) from(ctx context.Context, in sandbox.Instruction) error {
	if len(in.Args) == 0 {
		return b.fail(in, "FROM without an image")
	}
	for _, f := range in.Flags {
		if !strings.HasPrefix(f, "--platform=") {
			return b.fail(in, "FROM %s: option not supported", f)
		}
	}
	b.name = ""
	switch {
	case len(in.Args) == 3 && strings.EqualFold(in.Args[1], "AS"):
		b.name = strings.ToLower(in.Args[2])
	case len(in.Args) != 1:
		return b.fail(in, "FROM %s: want an image and optionally AS name", in.Raw)
	}
	name, err := sandbox.ExpandWord(in.Args[0], b.vars)
	if err != nil {
		return b.fail(in, "FROM: %v", err)
	}
	if s, ok := b.stage(name); ok {
		b.layers, b.keys, b.key = slices.Clone(s.layers), slices.Clone(s.keys), s.key
		b.envList, b.workdir = slices.Clone(s.envList), s.workdir
		for _, kv := range s.envList {
			k, v, _ := strings.Cut(kv, "=")
			b.vars[k] = v
		}
		b.note(fmt.Sprintf("FROM %s → the stage %s", name, name))
		return nil
	}
	m, err := mapFrom(name, b.opt.Base)
	if err != nil {
		return b.fail(in, "FROM %s: %v", name, err)
	}
	b.note(m.note)
	if err := b.base(ctx); err != nil {
		return b.fail(in, "FROM %s: %v", name, err)
	}
	for _, s := range m.extra {
		if err := b.runStep(ctx, in, "RUN "+s, []string{"/bin/sh", "-c", s}); err != nil {
			return err
		}
	}
	return nil
}

// note records what a stage's FROM became: the last stage's is the
// image's Mapping, the others' go to its notes.
func (b *builder) note(n string) {
	if b.res.Mapping != "" {
		b.stageNotes = append(b.stageNotes, "earlier stage: "+b.res.Mapping)
	}
	b.res.Mapping = n
}

// endStage keeps the current stage for COPY --from and a later FROM, and
// starts the next one from the ARGs before the first FROM.
func (b *builder) endStage() {
	b.stages = append(b.stages, stage{name: b.name, layers: b.layers, keys: b.keys, key: b.key, envList: b.envList, workdir: b.workdir})
	b.layers, b.keys, b.key, b.envList, b.workdir = nil, nil, "", nil, "/"
	b.vars, b.argList = copyVars(b.global.vars), slices.Clone(b.global.argList)
}

// stage finds a finished stage by name or position.
func (b *builder) stage(ref string) (stage, bool) {
	for i, s := range b.stages {
		if (s.name != "" && s.name == strings.ToLower(ref)) || strconv.Itoa(i) == ref {
			return s, true
		}
	}
	return stage{}, false
}

// fromFlag is a COPY's --from=, if any.
func fromFlag(in sandbox.Instruction) (string, bool) {
	for _, f := range in.Flags {
		if v, ok := strings.CutPrefix(f, "--from="); ok {
			return v, true
		}
	}
	return "", false
}

// copyFrom applies COPY --from=ref: ref is an earlier stage, or an image
// the base maps, built as a stage of its own. Its key covers the source
// stage's key, which names that stage's whole filesystem.
func (b *builder) copyFrom(ctx context.Context, in sandbox.Instruction, text, ref string) error {
	if in.Cmd == "ADD" {
		return b.fail(in, "ADD --from: only COPY copies from a stage or an image")
	}
	ref, err := sandbox.ExpandWord(ref, b.vars)
	if err != nil {
		return b.fail(in, "COPY --from: %v", err)
	}
	src, ok := b.stage(ref)
	if !ok {
		if src, err = b.imageStage(ctx, in, ref); err != nil {
			return err
		}
	}
	wd, vars := b.workdir, copyVars(b.vars)
	return b.layer(ctx, in, text, "from="+src.key, func(r *sandbox.BuildRoot) error {
		scratch, release, err := b.cache.scratch()
		if err != nil {
			return err
		}
		defer release()
		from, err := sandbox.MountBuild(src.layers, filepath.Join(scratch, "upper"), filepath.Join(scratch, "work"), filepath.Join(scratch, "mnt"))
		if err != nil {
			return err
		}
		cerr := r.CopyFrom(ctx, in, from, ref, wd, vars)
		if err := from.Close(); cerr == nil {
			cerr = err
		}
		return cerr
	})
}

// imageStage builds the image a COPY --from names, when the base maps it,
// as an unnamed stage; the current stage is left as it was.
func (b *builder) imageStage(ctx context.Context, in sandbox.Instruction, ref string) (stage, error) {
	m, err := mapFrom(ref, b.opt.Base)
	if err != nil {
		return stage{}, b.fail(in, "COPY --from=%s: neither an earlier stage nor an image the builder can fetch: %v", ref, err)
	}
	// Built as its own FROM would be, with nothing of the current stage.
	saved := *b
	defer func() {
		b.layers, b.keys, b.key = saved.layers, saved.keys, saved.key
		b.argList, b.envList, b.workdir = saved.argList, saved.envList, saved.workdir
	}()
	b.argList, b.envList, b.workdir = slices.Clone(b.global.argList), nil, "/"
	if err := b.base(ctx); err != nil {
		return stage{}, b.fail(in, "COPY --from=%s: %v", ref, err)
	}
	for _, s := range m.extra {
		if err := b.runStep(ctx, in, "RUN "+s, []string{"/bin/sh", "-c", s}); err != nil {
			return stage{}, err
		}
	}
	b.stageNotes = append(b.stageNotes, "COPY --from="+ref+": "+m.note)
	return stage{layers: b.layers, keys: b.keys, key: b.key}, nil
}

// networkTool names the installer a failed RUN used, for its one-line
// reason.
var networkTool = regexp.MustCompile(`\b(apt-get|apt|pip3?|uv|uvx|curl|wget|npm|git clone|go install|cargo install)\b`)

func (b *builder) runStep(ctx context.Context, in sandbox.Instruction, text string, argv []string) error {
	env := append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}, b.argList...)
	env = mergeAll(env, b.envList)
	wd := b.workdir
	// The key covers what the command sees: its text, ARG and ENV.
	inputs := strings.Join(env, "\x00") + "\x00dir=" + wd
	return b.layer(ctx, in, text, inputs, func(r *sandbox.BuildRoot) error {
		var out bytes.Buffer
		w := io.MultiWriter(b.opt.Log, &tail{buf: &out})
		// A proxy of the step's own: its log is the step's. The proxy's
		// variables are not among the key's inputs: where a step may
		// reach is the allow-list's, not the layer's.
		proxy, err := egress.New(b.opt.Registries)
		if err != nil {
			return err
		}
		r.Proxy = proxy
		code, err := r.Run(ctx, argv, env, wd, b.opt.StepTimeout, w)
		proxy.Close()
		reqs, omitted := proxy.Requests()
		for _, q := range reqs {
			fmt.Fprintf(b.opt.Log, "egress: %s\n", q)
		}
		if omitted > 0 {
			fmt.Fprintf(b.opt.Log, "egress: %d more requests\n", omitted)
		}
		b.res.Egress = append(b.res.Egress, reqs...)
		if err != nil {
			return err
		}
		if code == 0 {
			return nil
		}
		reason := fmt.Sprintf("exit code %d", code)
		if code == -1 {
			reason = fmt.Sprintf("timed out after %s", b.opt.StepTimeout)
		}
		if last := lastLine(out.String()); last != "" {
			reason += ": " + last
		}
		if refused := refusedHosts(reqs); refused != "" {
			reason += " (the registries proxy refused " + refused + ": the build reaches only " + strings.Join(b.opt.Registries, ", ") + ")"
		} else if m := networkTool.FindString(text); m != "" {
			reason += fmt.Sprintf(" (%s may need the network: the build reaches only %s, through t1's proxy, which refused nothing here)", m, strings.Join(b.opt.Registries, ", "))
		}
		return errors.New(reason)
	})
}

// refusedHosts names the hosts:ports the proxy refused, once each.
func refusedHosts(reqs []egress.Request) string {
	var out []string
	for _, q := range reqs {
		h := net.JoinHostPort(q.Host, strconv.Itoa(q.Port))
		if !q.Allowed && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return strings.Join(out, ", ")
}

// layer builds (or finds in the cache) the layer of one step.
func (b *builder) layer(ctx context.Context, in sandbox.Instruction, text, inputs string, apply func(*sandbox.BuildRoot) error) error {
	key := hashKey(b.key, text, inputs)
	st := Step{Instruction: text, Line: in.Line, Key: key}
	start := time.Now()
	dir, hit, err := b.cache.get(key, func(upper, work, mnt string) error {
		r, err := sandbox.MountBuild(b.layers, upper, work, mnt)
		if err != nil {
			return err
		}
		hostres.Point("image.build")
		aerr := apply(r)
		if cerr := r.Close(); aerr == nil {
			aerr = cerr
		}
		return aerr
	})
	if err != nil {
		var de *sandbox.DockerfileError
		if errors.As(err, &de) {
			return err
		}
		return b.fail(in, "%s: %v", oneLine80(text), err)
	}
	st.Cached, st.Duration = hit, time.Since(start)
	st.Size = b.cache.size(key)
	b.res.Steps = append(b.res.Steps, st)
	b.layers, b.keys = append(b.layers, dir), append(b.keys, key)
	b.key = key
	return nil
}

// base makes (or finds) the debootstrap layer.
func (b *builder) base(ctx context.Context) error {
	bs := b.opt.Base
	text := fmt.Sprintf("debootstrap --variant=%s %s %s", bs.Variant, bs.Suite, bs.Mirror)
	key := hashKey("", text, runtime.GOARCH)
	start := time.Now()
	dir, hit, err := b.cache.get(key, func(upper, _, _ string) error {
		if _, err := exec.LookPath("debootstrap"); err != nil {
			return errors.New("debootstrap not found: install it (apt-get install debootstrap, or make setup)")
		}
		debs := filepath.Join(b.cache.dir, "debs")
		if err := os.MkdirAll(debs, 0o755); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, b.opt.StepTimeout)
		defer cancel()
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, "debootstrap", "--variant="+bs.Variant, "--cache-dir="+debs, bs.Suite, upper, bs.Mirror)
		cmd.Stdout = io.MultiWriter(b.opt.Log, &tail{buf: &out})
		cmd.Stderr = cmd.Stdout
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("debootstrap: %v: %s", err, lastLine(out.String()))
		}
		// The device nodes debootstrap makes: bwrap mounts a /dev of its
		// own over them, at build and in the sandbox, and a layer holds no
		// devices but whiteouts.
		ents, err := os.ReadDir(filepath.Join(upper, "dev"))
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := os.RemoveAll(filepath.Join(upper, "dev", e.Name())); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	b.res.Steps = append(b.res.Steps, Step{Instruction: text, Key: key, Cached: hit, Duration: time.Since(start), Size: b.cache.size(key)})
	b.layers, b.keys = []string{dir}, []string{key}
	b.key = key
	return nil
}

// contextHash hashes the build context (environment/): every name, type,
// mode, link target and file's contents, no link followed.
func (b *builder) contextHash() (string, error) {
	if b.ctxHash != "" {
		return b.ctxHash, nil
	}
	h := sha256.New()
	err := filepath.WalkDir(b.envDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(b.envDir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00", t)
		case fi.Mode().IsRegular():
			f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	b.ctxHash = hex.EncodeToString(h.Sum(nil))
	return b.ctxHash, nil
}

func hashKey(parent, text, inputs string) string {
	h := sha256.New()
	fmt.Fprintf(h, "t1-image-layer-v2\x00%s\x00%s\x00%s", parent, text, inputs)
	return hex.EncodeToString(h.Sum(nil))
}

// dirSize is the bytes of the regular files under dir (a layer's size),
// links not followed.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func merge(list []string, kv string) []string { return mergeAll(list, []string{kv}) }

// mergeAll overrides list's keys by later ones, keeping first positions.
func mergeAll(list, more []string) []string {
	out := append([]string(nil), list...)
	for _, kv := range more {
		k, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, o := range out {
			if ok, _, _ := strings.Cut(o, "="); ok == k {
				out[i], replaced = kv, true
				break
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}

func copyVars(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// tail keeps the last 4 KiB written.
type tail struct{ buf *bytes.Buffer }

func (t *tail) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if t.buf.Len() > 8<<10 {
		b := t.buf.Bytes()[t.buf.Len()-4<<10:]
		nb := append([]byte(nil), b...)
		t.buf.Reset()
		t.buf.Write(nb)
	}
	return len(p), nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return oneLine80(l)
		}
	}
	return ""
}

func oneLine80(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:157] + "…"
	}
	return s
}
