package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/infra/sandbox/sandboxtest"
	"github.com/t1pipe/t1/internal/hostfeature"
	"github.com/t1pipe/t1/internal/testinfra"
)

func TestMain(m *testing.M) {
	if os.Getenv(copyHelperEnv) != "" {
		os.Exit(copyHelper())
	}
	code := testinfra.Main(m)
	if binCache != "" {
		os.RemoveAll(binCache)
	}
	os.Exit(code)
}

func writeTask(t testing.TB, dockerfile string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	env := filepath.Join(dir, "environment")
	if err := os.MkdirAll(env, 0o755); err != nil {
		t.Fatal(err)
	}
	files["Dockerfile"] = dockerfile
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(env, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestHostBase(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755)
	os.WriteFile(filepath.Join(dir, "sources.list.d", "debian.sources"), []byte(`Types: deb
# a comment
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
`), 0o644)
	b, err := HostBase(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b != (Base{Mirror: "http://mirror.example/debian", Suite: "bookworm", Variant: "minbase"}) {
		t.Fatalf("base %+v", b)
	}
	empty := t.TempDir()
	if _, err := HostBase(empty); err == nil || !strings.Contains(err.Error(), "no Debian mirror") {
		t.Fatalf("no sources: %v", err)
	}
	os.WriteFile(filepath.Join(empty, "sources.list"), []byte("deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian trixie main\n"), 0o644)
	if b, err := HostBase(empty); err != nil || b.Mirror != "http://m.example/debian" || b.Suite != "trixie" {
		t.Fatalf("sources.list: %+v %v", b, err)
	}
}

// TestUnbuildable: what cannot be built fails before anything is built,
// in one line naming the instruction and the reason.
func TestUnbuildable(t *testing.T) {
	base := Base{Mirror: "http://mirror.example/debian", Suite: "bookworm", Variant: "minbase"}
	for _, tc := range []struct{ dockerfile, want string }{
		{"FROM nvidia/cuda:12.2.0-runtime-ubuntu22.04\nRUN true\n", `Dockerfile:1: FROM nvidia/cuda:12.2.0-runtime-ubuntu22.04: unknown base image`},
		{"FROM alpine:3.19\n", "unknown base image"},
		{"RUN true\nFROM debian:bookworm\n", "Dockerfile:1: RUN before FROM"},
		{"ARG V=1\n", "no FROM"},
	} {
		task := writeTask(t, tc.dockerfile, map[string]string{})
		_, err := Build(context.Background(), task, Options{CacheDir: t.TempDir(), Base: base})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want one line with %q", tc.dockerfile, err, tc.want)
		}
	}
	for image, want := range map[string]string{
		"python:3.13-slim-bookworm":      "python3 as python",
		"docker.io/library/ubuntu:22.04": "Ubuntu package names",
		"debian:bookworm-slim":           "debian bookworm (debootstrap minbase from http://mirror.example/debian)",
	} {
		m, err := mapFrom(image, base)
		if err != nil || !strings.Contains(m.note, want) {
			t.Errorf("%s: %q %v, want %q", image, m.note, err, want)
		}
	}
}

// testBase returns the cache directory of this test binary, holding the
// Debian base: made once per machine under the system temporary
// directory (keyed by mirror and suite) and linked into the binary's
// cache, since debootstrap takes a minute or more and t1's source tree is
// no place for a root filesystem.
func testBase(t testing.TB) (string, Base) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a Debian base with debootstrap and installs from the mirror: not in -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("building images needs root (overlayfs, debootstrap)")
	}
	hostfeature.Require(t, hostfeature.KernelOverlay())
	b, err := HostBase("")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(b.Mirror)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"https": "443"}[u.Scheme]+map[bool]string{true: "80"}[u.Scheme != "https"])
	}
	if c, err := net.DialTimeout("tcp", host, 5*time.Second); err != nil {
		t.Skipf("the Debian mirror %s is unreachable (%v): image builds need it", b.Mirror, err)
	} else {
		c.Close()
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Fatal("debootstrap is not installed: make setup installs it")
	}
	baseOnce.Do(func() {
		h := sha256.Sum256([]byte(b.Mirror + "\x00" + b.Suite))
		shared := filepath.Join(os.TempDir(), "t1-image-base-"+hex.EncodeToString(h[:8]))
		task := writeTask(t, "FROM debian:"+b.Suite+"\n", map[string]string{})
		res, err := Build(context.Background(), task, Options{CacheDir: shared, Base: b})
		if err != nil {
			baseErr = err
			return
		}
		baseDir, baseKey = shared, res.Steps[0].Key
		baseErr = linkBase()
	})
	if baseErr != nil {
		t.Fatal(baseErr)
	}
	return binCache, b
}

// linkBase makes the cache this test binary's tests share (so that the
// python layer, say, is built once) and links the base into it. Hard
// links: a layer is never written once built.
func linkBase() error {
	var err error
	if binCache, err = os.MkdirTemp("", "t1-image-cache-"); err != nil {
		return err
	}
	os.MkdirAll(filepath.Join(binCache, "layers"), 0o700)
	os.MkdirAll(filepath.Join(binCache, "sizes"), 0o700)
	if out, err := exec.Command("cp", "-al", filepath.Join(baseDir, "layers", baseKey), filepath.Join(binCache, "layers", baseKey)).CombinedOutput(); err != nil {
		return fmt.Errorf("linking the base: %v: %s", err, out)
	}
	return nil
}

var (
	baseOnce         sync.Once
	baseDir, baseKey string
	baseErr          error
	binCache         string // removed by TestMain
)

func bwrap(t testing.TB) sandbox.Backend {
	be, err := sandbox.ByName("bwrap", false)
	if err != nil {
		t.Fatal(err)
	}
	return be
}

func exec1(t testing.TB, sb sandbox.Sandbox, script string) sandbox.Result {
	t.Helper()
	res, err := sb.Exec(context.Background(), sandbox.Cmd{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestImageFromDockerfile builds a task whose Dockerfile installs a
// Debian package the host lacks, runs it offline, and rebuilds it from
// the cache.
func TestImageFromDockerfile(t *testing.T) {
	cache, base := testBase(t)
	if _, err := os.Stat("/usr/games/sl"); err == nil {
		t.Skip("the host has sl installed: the test needs a package the host lacks")
	}
	task := writeTask(t, `FROM python:3.13-slim-bookworm
ARG GREETING=hello
ENV T1_GREETING=${GREETING}
WORKDIR /app
COPY data.txt ./
RUN apt-get update && apt-get install -y sl
RUN rm /etc/issue && rm -rf /usr/share/doc && mkdir /usr/share/doc && touch /usr/share/doc/t1
`, map[string]string{"data.txt": "from the build context\n"})
	ctx := context.Background()
	opt := Options{CacheDir: cache, Base: base}
	res, err := Build(ctx, task, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Mapping, "FROM python:3.13-slim-bookworm → debian") {
		t.Errorf("mapping %q", res.Mapping)
	}
	layers := res.Layers()
	// base, python, WORKDIR, COPY, RUN, RUN
	if len(layers) != 6 || !layers[0].Cached || layers[4].Cached {
		t.Fatalf("layers %+v", layers)
	}

	sb, err := bwrap(t).Start(ctx, sandbox.Spec{Image: res.Image})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	r := exec1(t, sb, `set -e; test -x /usr/games/sl; python --version; cat data.txt; echo "$T1_GREETING"; pwd
python -c 'import socket; socket.create_connection(("deb.debian.org", 80), 3)' 2>/dev/null && echo ONLINE || echo offline
test ! -e /etc/issue; ls /usr/share/doc`)
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "Python 3") || !strings.Contains(r.Stdout, "from the build context\nhello\n/app\noffline\nt1\n") {
		t.Fatalf("image sandbox: %+v", r)
	}
	// The per-attempt layer takes writes anywhere, and only that attempt
	// sees them.
	if r := exec1(t, sb, "echo mine > /etc/t1-attempt && rm /usr/games/sl && cat /etc/t1-attempt"); r.ExitCode != 0 || r.Stdout != "mine\n" {
		t.Fatalf("writable layer: %+v", r)
	}
	sb2, err := bwrap(t).Start(ctx, sandbox.Spec{Image: res.Image})
	if err != nil {
		t.Fatal(err)
	}
	if r := exec1(t, sb2, "test -x /usr/games/sl && test ! -e /etc/t1-attempt"); r.ExitCode != 0 {
		t.Fatalf("a fresh sandbox saw another's writes: %+v", r)
	}
	sb2.Close()

	host, err := bwrap(t).Start(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if r := exec1(t, host, "test -x /usr/games/sl"); r.ExitCode == 0 {
		t.Fatal("host mode has sl: the test cannot tell the modes apart")
	}

	again, err := Build(ctx, task, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range again.Layers() {
		if !l.Cached {
			t.Errorf("rebuild missed the cache at %s", l.Instruction)
		}
	}
	if strings.Join(again.Image.Layers, " ") != strings.Join(res.Image.Layers, " ") {
		t.Errorf("rebuild gave other layers")
	}

	// The backend sandbox.image: dockerfile selects builds (here: finds)
	// the task's image at Start.
	sb4, err := (&Backend{Inner: bwrap(t), Options: opt}).Start(ctx, sandbox.Spec{TaskDir: task})
	if err != nil {
		t.Fatal(err)
	}
	if r := exec1(t, sb4, "test -x /usr/games/sl && cat data.txt"); r.ExitCode != 0 || r.Stdout != "from the build context\n" {
		t.Fatalf("image backend: %+v", r)
	}
	sb4.Close()

	// Through the object store into an empty cache: the same trees, and a
	// sandbox runs on them.
	st := testinfra.FreshStore(t)
	if n, err := Push(ctx, st, res); err != nil || n != len(layers) {
		t.Fatalf("push: %d layers, %v", n, err)
	}
	if n, err := Push(ctx, st, res); err != nil || n != 0 {
		t.Fatalf("second push stored %d layers again (%v)", n, err)
	}
	pulled := &sandbox.Image{Env: res.Image.Env, WorkDir: res.Image.WorkDir}
	fresh := t.TempDir()
	for i, l := range layers {
		dir, err := Pull(ctx, st, fresh, l.Key)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := treeList(t, res.Image.Layers[i]), treeList(t, dir); a != b {
			t.Fatalf("layer %s differs after the store:\n%.2000s", l.Instruction, diffLines(a, b))
		}
		pulled.Layers = append(pulled.Layers, dir)
	}
	sb3, err := bwrap(t).Start(ctx, sandbox.Spec{Image: pulled})
	if err != nil {
		t.Fatal(err)
	}
	if r := exec1(t, sb3, "test -x /usr/games/sl && test ! -e /etc/issue && ls /usr/share/doc && cat data.txt"); r.ExitCode != 0 || r.Stdout != "t1\nfrom the build context\n" {
		t.Fatalf("sandbox on pulled layers: %+v", r)
	}
	sb3.Close()

	// A task sharing the prefix shares its layers; what cannot be built
	// fails in one line.
	for _, tc := range []struct{ dockerfile, want string }{
		{"FROM debian:bookworm\nCOPY --from=builder /out /app\n", "Dockerfile:2: COPY --from=builder: neither an earlier stage nor an image the builder can fetch"},
		{"FROM debian:bookworm\nRUN exit 3\n", "Dockerfile:2: RUN exit 3: exit code 3"},
		{"FROM debian:bookworm\nRUN apt-get install -y no-such-package-t1\n", "Dockerfile:2: RUN apt-get install -y no-such-package-t1: exit code 100: E: Unable to locate package no-such-package-t1 (apt-get may need the network: the build reaches only "},
		{"FROM debian:bookworm\nADD https://example.com/x.tgz /app/\n", "fetching a URL"},
	} {
		_, err := Build(ctx, writeTask(t, tc.dockerfile, map[string]string{}), opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want one line with %q", tc.dockerfile, err, tc.want)
		}
	}
}

// treeList lists a layer: every name with its type and mode, owner,
// device, link target, size and the opaque mark.
func treeList(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		link, _ := os.Readlink(p)
		size := st.Size
		if d.IsDir() {
			size = 0
		}
		v := make([]byte, 1)
		n, _ := unix.Lgetxattr(p, opaqueXattr, v)
		lines = append(lines, fmt.Sprintf("%s %o %d:%d rdev=%d %q %d opaque=%q", rel, st.Mode, st.Uid, st.Gid, st.Rdev, link, size, v[:max(n, 0)]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func diffLines(a, b string) string {
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(a, "\n") {
		inA[l] = true
	}
	var d []string
	for _, l := range strings.Split(b, "\n") {
		inB[l] = true
		if !inA[l] {
			d = append(d, "+ "+l)
		}
	}
	for _, l := range strings.Split(a, "\n") {
		if !inB[l] {
			d = append(d, "- "+l)
		}
	}
	return strings.Join(d, "\n")
}

// TestImageBuildDoesNotFollowPlantedLinks: a RUN step plants links to a
// host directory; the host-side COPY and WORKDIR that follow must not
// write through them.
func TestImageBuildDoesNotFollowPlantedLinks(t *testing.T) {
	cache, base := testBase(t)
	host := t.TempDir()
	for _, tc := range []struct{ name, dockerfile string }{
		{"absolute link, COPY", "FROM debian:bookworm\nRUN ln -s " + host + " /planted\nCOPY f /planted/\n"},
		{"relative link, COPY", "FROM debian:bookworm\nRUN ln -s ../../../../../../../../.." + host + " /planted\nCOPY f /planted/f\n"},
		{"link, WORKDIR", "FROM debian:bookworm\nRUN ln -s " + host + " /planted\nWORKDIR /planted/sub\n"},
	} {
		_, err := Build(context.Background(), writeTask(t, tc.dockerfile, map[string]string{"f": "planted\n"}), Options{CacheDir: cache, Base: base})
		if err == nil || !strings.Contains(err.Error(), "planted") || !strings.Contains(err.Error(), "symbolic link") && !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("%s: got %v, want a refusal naming the planted link", tc.name, err)
		}
		if ents, _ := os.ReadDir(host); len(ents) != 0 {
			t.Fatalf("%s: the build wrote into the host directory the link named: %v", tc.name, ents)
		}
	}
}

// TestReadLayerRefusesEscapes: a layer from the store is unpacked only
// into its own directory.
func TestReadLayerRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	for name, entries := range map[string][]tar.Header{
		"dot-dot":    {{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		"absolute":   {{Name: outside + "/escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		"below link": {{Name: "l", Typeflag: tar.TypeSymlink, Linkname: outside}, {Name: "l/escape", Typeflag: tar.TypeReg, Mode: 0o644}},
		"unclean":    {{Name: "a/../../escape", Typeflag: tar.TypeReg, Mode: 0o644}},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range entries {
			tw.WriteHeader(&h)
		}
		tw.Close()
		dir := filepath.Join(t.TempDir(), "layer")
		os.Mkdir(dir, 0o755)
		if err := readLayer(&buf, dir); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Fatalf("%s: wrote outside the layer: %v", name, ents)
		}
		if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
			t.Fatalf("%s: wrote beside the layer", name)
		}
	}
}

// onImage starts every sandbox on one image, the task's environment (its
// Dockerfile subset or setup.sh) built on top as in host mode.
type onImage struct {
	sandbox.Backend
	img *sandbox.Image
}

func (o onImage) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	spec.Image = o.img
	return o.Backend.Start(ctx, spec)
}

// TestImageConformance runs the sandbox conformance suite on an image
// root: the Debian base with python3.
func TestImageConformance(t *testing.T) {
	cache, base := testBase(t)
	res, err := Build(context.Background(), writeTask(t, "FROM python:3.11\n", map[string]string{}), Options{CacheDir: cache, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, onImage{bwrap(t), res.Image})
}
