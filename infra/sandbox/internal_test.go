package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestHeadTail(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, max := range []int{2, 7, 64, 1000} {
		for trial := 0; trial < 50; trial++ {
			total := rng.IntN(3 * max)
			data := make([]byte, total)
			for i := range data {
				data[i] = byte(rng.IntN(256))
			}
			h := newHeadTail(max, nil)
			for rest := data; len(rest) > 0; {
				n := 1 + rng.IntN(len(rest))
				h.Write(rest[:n])
				rest = rest[n:]
			}
			got, trunc := h.result()
			if total <= max {
				if trunc || got != string(data) {
					t.Fatalf("max %d, %d bytes: got %q truncated %v", max, total, got, trunc)
				}
				continue
			}
			headN := max / 2
			tailN := max - headN
			want := string(data[:headN]) + "\n[… " + strconv.Itoa(total-max) + " bytes omitted …]\n" + string(data[total-tailN:])
			if !trunc || got != want {
				t.Fatalf("max %d, %d bytes: got %q, want %q", max, total, got, want)
			}
		}
	}
}

func TestHeadTailStreams(t *testing.T) {
	t.Parallel()
	var all bytes.Buffer
	h := newHeadTail(4, &all)
	h.Write([]byte("abcdefgh"))
	if all.String() != "abcdefgh" {
		t.Errorf("stream got %q", all.String())
	}
	if got, _ := h.result(); got != "ab\n[… 4 bytes omitted …]\ngh" {
		t.Errorf("kept %q", got)
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"0": 0, "512": 512, "1KiB": 1024, "4GiB": 4 << 30, "10M": 10 << 20, "3 mb": 3 << 20, "2T": 2 << 40, "7B": 7} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
		if err == nil && got != 0 {
			back, err := ParseSize(FormatSize(got))
			if err != nil || back != got {
				t.Errorf("FormatSize(%d) = %q does not read back", got, FormatSize(got))
			}
		}
	}
	for _, bad := range []string{"", "GiB", "-1", "1.5GiB", "4 gigabytes", "99999999999999999999", "9000000TiB"} {
		if _, err := ParseSize(bad); err == nil || !strings.Contains(err.Error(), "size") {
			t.Errorf("ParseSize(%q) = %v, want an error", bad, err)
		}
	}
}

func TestLimitsDefaults(t *testing.T) {
	t.Parallel()
	l := Limits{Processes: 9}.withDefaults()
	d := DefaultLimits()
	if l.Processes != 9 || l.Memory != d.Memory || l.WallClock != d.WallClock || l.Disk != d.Disk {
		t.Errorf("withDefaults = %+v", l)
	}
	s := Limits{CPUSeconds: 5, Memory: 1 << 20, FileSize: 2048, OpenFiles: 64, Processes: 10}.ulimitScript(true)
	if s != "ulimit -HSt 5 -HSv 1024 -HSf 2 -HSn 64 -HSu 10 || exit 126" {
		t.Errorf("ulimitScript = %q", s)
	}
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"app/x", "app/", "tmp/a/b", "var/tmp/x", "root/.wh.x", "logs/verifier/r.json"} {
		if _, err := checkName(ok); err != nil {
			t.Errorf("checkName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/app/x", "../app", "app/../../x", "etc/passwd", "var/lib/x", "app//x", "./app/x", "usr"} {
		if _, err := checkName(bad); err == nil {
			t.Errorf("checkName(%q) accepted", bad)
		}
	}
}

func TestMergeEnv(t *testing.T) {
	t.Parallel()
	got := mergeEnv([]string{"A=1", "B=2"}, []string{"B=3", "C=4"}, nil, []string{"A=5"})
	if want := []string{"A=5", "B=3", "C=4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("mergeEnv = %q, want %q", got, want)
	}
}

func TestParseDockerfile(t *testing.T) {
	t.Parallel()
	src := "# syntax=docker/dockerfile:1\n" +
		"FROM python:3.11 AS base\n" +
		"\n" +
		"# comment\n" +
		"RUN apt-get update && \\\n" +
		"    # a comment inside a continuation\n" +
		"    apt-get install -y curl\n" +
		"ENV A=1 B=\"two words\" \\\n" +
		"    C=${A:-x}\n" +
		"copy --chown=1:1 [\"a b\", \"/app/\"]\n" +
		"CMD [\"python3\", \"x.py\"]\r\n" +
		"WORKDIR /app\n"
	ins, err := ParseDockerfile("Dockerfile", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	type brief struct {
		Cmd   string
		Line  int
		Args  []string
		Flags []string
		JSON  bool
	}
	var got []brief
	for _, in := range ins {
		got = append(got, brief{in.Cmd, in.Line, in.Args, in.Flags, in.JSON})
	}
	want := []brief{
		{"FROM", 2, []string{"python:3.11", "AS", "base"}, nil, false},
		{"RUN", 5, []string{"apt-get", "update", "&&", "apt-get", "install", "-y", "curl"}, nil, false},
		{"ENV", 8, []string{"A=1", `B="two words"`, "C=${A:-x}"}, nil, false},
		{"COPY", 10, []string{"a b", "/app/"}, []string{"--chown=1:1"}, true},
		{"CMD", 11, []string{"python3", "x.py"}, nil, true},
		{"WORKDIR", 12, []string{"/app"}, nil, false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	pairs, err := envPairs(ins[2], map[string]string{})
	if err != nil || !reflect.DeepEqual(pairs, []string{"A=1", "B=two words", "C=x"}) {
		t.Errorf("ENV pairs = %q, %v", pairs, err)
	}
	legacy, _ := ParseDockerfile("D", []byte("ENV NAME some value here\n"))
	if pairs, err := envPairs(legacy[0], nil); err != nil || pairs[0] != "NAME=some value here" {
		t.Errorf("legacy ENV = %q, %v", pairs, err)
	}
}

func TestParseDockerfileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, want string }{
		{"FROM x\nFRUM y\n", `D:2: unknown instruction "FRUM"`},
		{"FROM x\nRUN echo 'open\n", "D:2: RUN: unterminated ' quote"},
		{"# escape=`\nFROM x\n", "D:1: escape directive"},
		{"FROM x\nRUN <<EOF\necho hi\nEOF\n", "D:2: RUN with a here-document"},
	} {
		_, err := ParseDockerfile("D", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
	}
}

func TestUnquote(t *testing.T) {
	t.Parallel()
	env := map[string]string{"A": "1", "EMPTY": ""}
	for in, want := range map[string]string{
		`plain`: "plain", `"a b"`: "a b", `'$A'`: "$A", `$A`: "1", `${A}x`: "1x", `"$A"`: "1",
		`${EMPTY:-def}`: "def", `${A:+alt}`: "alt", `${NONE:+alt}`: "", `a\ b`: "a b", `$`: "$", `$1`: "$1",
	} {
		got, err := unquote(in, env)
		if err != nil || got != want {
			t.Errorf("unquote(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`"open`, `${A`, `${A:?x}`, `${}`} {
		if _, err := unquote(bad, env); err == nil {
			t.Errorf("unquote(%q) accepted", bad)
		}
	}
}

// FuzzParseDockerfile: the parser never panics, and what it accepts is
// well-formed: known keywords, increasing lines within the file.
func FuzzParseDockerfile(f *testing.F) {
	for _, s := range []string{
		"FROM x\nRUN echo hi\n",
		"FROM x\nENV A=1 \\\n  B=2\nCOPY [\"a\",\"b\"] /app/\n",
		"# escape=\\\nFROM x\n\n# c\nRUN a \\\n# c\n b\n",
		"RUN \\",
		"ENV A=\"${B:-x}\" C='$D'\n",
		"COPY --chmod=755 --from=a x y\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ins, err := ParseDockerfile("F", data)
		if err != nil {
			return
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		last := 0
		for _, in := range ins {
			if !knownInstructions[in.Cmd] {
				t.Fatalf("unknown keyword %q accepted", in.Cmd)
			}
			if in.Line <= last || in.Line > lines {
				t.Fatalf("line %d after %d (file has %d)", in.Line, last, lines)
			}
			last = in.Line
			for _, w := range in.Args {
				_, _ = unquote(w, map[string]string{"A": "1"})
			}
			if in.Cmd == "ENV" {
				_, _ = envPairs(in, map[string]string{})
			}
		}
	})
}

// Both ways of measuring count allocated blocks, hard links once.
func TestDiskUsageCountsBlocks(t *testing.T) {
	forEachDiskMode(t, func(t *testing.T) {
		b, err := newBox(&plainLauncher{}, Spec{}, -1, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer b.removeAll()
		before := b.usage()
		if err := b.fsRoot.WriteFile("app/f", bytes.Repeat([]byte("x"), 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := b.fsRoot.Link("app/f", "app/hard"); err != nil {
			t.Fatal(err)
		}
		after := b.usage()
		if grown := after.bytes - before.bytes; grown < 1<<20 || grown > 1<<20+64<<10 {
			t.Errorf("a 1 MiB file (hard-linked twice) grew usage by %d bytes", grown)
		}
		if n := after.inodes - before.inodes; n != 2 {
			t.Errorf("a file and a hard link to it count as %d inodes, want 2 (tmpfs counts each name)", n)
		}
	})
}

// forEachDiskMode runs test with the mode a root caller gets (a tmpfs per
// sandbox) and with the measuring fallback of unprivileged callers.
func forEachDiskMode(t *testing.T, test func(t *testing.T)) {
	for _, measured := range []bool{false, true} {
		name := DiskTmpfs
		if measured {
			name = DiskMeasured
		}
		t.Run(name, func(t *testing.T) {
			if !measured && os.Geteuid() != 0 {
				t.Skip("only a root caller mounts a tmpfs per sandbox")
			}
			measureOnly = measured
			defer func() { measureOnly = false }()
			test(t)
		})
	}
}

// layer builds a tar layer from (name, type, contents-or-target) triples.
func layer(t *testing.T, entries ...[3]string) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e[0], Mode: 0o644}
		switch e[1] {
		case "dir":
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case "link":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e[2]
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e[2]))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e[2]))
		}
	}
	tw.Close()
	return bytes.NewReader(buf.Bytes())
}

func TestRestoreEdgeCases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := newBox(&plainLauncher{}, Spec{}, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.removeAll()
	for _, name := range []string{"app/d/a", "app/d/sub/b", "app/keep"} {
		if err := b.ensureParent(name); err != nil {
			t.Fatal(err)
		}
		if err := b.fsRoot.WriteFile(name, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// An opaque whiteout empties the directory before the layer's own
	// entries for it.
	if err := b.Restore(ctx, layer(t, [3]string{"app/d/.wh..wh..opq", "file", ""}, [3]string{"app/d/new", "file", "n"})); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.Glob(b.fsRoot.FS(), "app/d/*")
	if !reflect.DeepEqual(names, []string{"app/d/new"}) {
		t.Errorf("after an opaque whiteout app/d holds %v", names)
	}
	// A link in the layer cannot carry later entries outside the sandbox.
	outside := t.TempDir()
	err = b.Restore(ctx, layer(t, [3]string{"app/esc", "link", outside}, [3]string{"app/esc/planted", "file", "x"}))
	if err == nil {
		t.Error("a layer wrote through a symbolic link")
	}
	if _, statErr := os.Stat(filepath.Join(outside, "planted")); statErr == nil {
		t.Errorf("a layer wrote %s outside the sandbox", filepath.Join(outside, "planted"))
	}
	// A whiteout may not remove a writable directory itself.
	if err := b.Restore(ctx, layer(t, [3]string{".wh.app", "file", ""})); err == nil {
		t.Error("a whiteout of /app was accepted")
	}
	// Garbage is an error, not a panic.
	if err := b.Restore(ctx, bytes.NewReader([]byte("not a tar stream at all, just text"))); err == nil {
		t.Error("garbage restored without error")
	}
}

// FuzzRestore: Restore of any byte stream returns (an error or not) without
// panicking, and never creates anything beside the sandbox's directories.
func FuzzRestore(f *testing.F) {
	seed := func(entries ...[3]string) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, e := range entries {
			h := &tar.Header{Name: e[0], Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e[2]))}
			if e[1] == "dir" {
				h.Typeflag, h.Size = tar.TypeDir, 0
			} else if e[1] == "link" {
				h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e[2], 0
			}
			tw.WriteHeader(h)
			if h.Typeflag == tar.TypeReg {
				tw.Write([]byte(e[2]))
			}
		}
		tw.Close()
		return buf.Bytes()
	}
	f.Add(seed([3]string{"app/x", "file", "hello"}, [3]string{"app/.wh.y", "file", ""}))
	f.Add(seed([3]string{"app/d/", "dir", ""}, [3]string{"app/d/l", "link", "../x"}, [3]string{"tmp/z", "file", "z"}))
	f.Add(seed([3]string{"app/l", "link", "/etc"}, [3]string{"app/l/passwd", "file", "x"}))
	f.Add(seed([3]string{"../x", "file", "x"}))
	f.Add([]byte("garbage"))
	b, err := newBox(&plainLauncher{}, Spec{}, -1, -1)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(b.removeAll)
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = b.Restore(context.Background(), bytes.NewReader(data))
		ents, err := os.ReadDir(b.root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() != "fs" && e.Name() != "ctl" {
				t.Fatalf("Restore created %s beside the sandbox's directories", e.Name())
			}
		}
		top, _ := os.ReadDir(b.fsDir)
		for _, e := range top {
			if p := "/" + e.Name(); p != "/var" && !slices.Contains(writableDirs, p) {
				t.Fatalf("Restore created /%s", e.Name())
			}
		}
	})
}

// blockingReader never returns.
type blockingReader struct{ ch chan struct{} }

func (r blockingReader) Read([]byte) (int, error) { <-r.ch; return 0, io.EOF }

func TestExecStdinThatNeverEnds(t *testing.T) {
	t.Parallel()
	b, err := newBox(&plainLauncher{}, Spec{}, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := blockingReader{make(chan struct{})}
	defer close(r.ch)
	done := make(chan Result, 1)
	go func() {
		res, _ := b.Exec(context.Background(), Cmd{Args: []string{"echo", "done"}, Stdin: r})
		done <- res
	}()
	select {
	case res := <-done:
		if res.Stdout != "done\n" {
			t.Errorf("result %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Exec waited for a stdin reader that never ends")
	}
}
