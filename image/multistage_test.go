package image_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/image"
	"github.com/t1pipe/t1/infra/sandbox"
)

const twoStage = `FROM debian:bookworm AS builder
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY hello.c .
RUN gcc -O2 -o /src/hello hello.c

FROM debian:bookworm
ENV GREETING=final
COPY --from=builder /src/hello /usr/local/bin/hello
COPY --from=0 /src/hello.c /app/src/
COPY --from=debian:bookworm /etc/debian_version /app/debian_version
WORKDIR /app
`

func writeHello(t *testing.T, dir, msg string) {
	t.Helper()
	src := "#include <stdio.h>\nint main(void) { puts(\"" + msg + "\"); return 0; }\n"
	if err := os.WriteFile(filepath.Join(dir, "environment", "hello.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A two-stage build: gcc compiles in the builder stage, the final stage
// gets the binary and none of the compiler; the image is the final
// stage's. Rebuilding finds every layer; a changed source rebuilds the
// compile and the COPY --from that follows it, nothing else.
func TestMultiStageBuild(t *testing.T) {
	cache, base := image.MachineCache(t)
	ctx := context.Background()
	dir := task(t, twoStage)
	// The layers are kept in the machine's cache between runs: a message
	// of this run's own makes the compile, and what follows it, new.
	nonce := strconv.FormatInt(time.Now().UnixNano(), 36)
	writeHello(t, dir, "hello from the builder "+nonce)
	opt := image.Options{CacheDir: cache, Base: base}
	res, err := image.Build(ctx, dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.ByName("bwrap", false)
	if err != nil {
		t.Fatal(err)
	}
	box, err := sb.Start(ctx, sandbox.Spec{Image: res.Image})
	if err != nil {
		t.Fatal(err)
	}
	r, err := box.Exec(ctx, sandbox.Cmd{Script: "hello; pwd; echo $GREETING; ls src; cat debian_version; command -v gcc || echo no-gcc; test -e /src && echo builder-root; true"})
	box.Close()
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 0 || r.Stdout != "hello from the builder "+nonce+"\n/app\nfinal\nhello.c\n"+readDebianVersion(t, res)+"no-gcc\n" {
		t.Fatalf("final stage: exit %d, stdout %q, stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	// The final image is the base and the final stage's layers, each
	// with its key (what Push stores it under).
	if n := len(res.Image.Layers); n != 5 || len(res.Keys) != n {
		t.Errorf("final image has %d layers and %d keys, want 5 (base, three COPY, WORKDIR): %v", n, len(res.Keys), res.Steps)
	}
	for i, k := range res.Keys {
		if filepath.Base(res.Image.Layers[i]) != k {
			t.Errorf("layer %d is %s, its key %s", i, res.Image.Layers[i], k)
		}
	}

	again, err := image.Build(ctx, dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range again.Layers() {
		if !s.Cached {
			t.Errorf("rebuild: %q not cached", s.Instruction)
		}
	}
	keys := func(r *image.Result) map[string]string {
		m := map[string]string{}
		for _, s := range r.Layers() {
			m[s.Instruction] = s.Key
		}
		return m
	}
	writeHello(t, dir, "hello again "+nonce)
	changed, err := image.Build(ctx, dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	before, after := keys(res), keys(changed)
	for _, s := range changed.Layers() {
		moved := before[s.Instruction] != after[s.Instruction]
		wantMoved := strings.HasPrefix(s.Instruction, "COPY hello.c") || strings.HasPrefix(s.Instruction, "RUN gcc") ||
			strings.HasPrefix(s.Instruction, "COPY --from=builder") || strings.HasPrefix(s.Instruction, "COPY --from=0") ||
			// Below a changed layer every key changes.
			strings.HasPrefix(s.Instruction, "COPY --from=debian") || strings.HasPrefix(s.Instruction, "WORKDIR /app")
		if moved != wantMoved || s.Cached == wantMoved && !strings.HasPrefix(s.Instruction, "debootstrap") {
			t.Errorf("after the source changed: %q key moved %v cached %v", s.Instruction, moved, s.Cached)
		}
	}
}

func readDebianVersion(t *testing.T, res *image.Result) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(res.Image.Layers[0], "etc", "debian_version"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// What a multi-stage Dockerfile asks for that cannot be built fails in
// one line naming it.
func TestMultiStageRefusals(t *testing.T) {
	cache, base := image.MachineCache(t)
	for _, c := range []struct{ dockerfile, want string }{
		{"FROM debian:bookworm\nCOPY --from=ghcr.io/astral-sh/uv:0.5.1 /uv /bin/\n", `Dockerfile:2: COPY --from=ghcr.io/astral-sh/uv:0.5.1: neither an earlier stage nor an image the builder can fetch`},
		{"FROM debian:bookworm AS a\nFROM debian:bookworm\nCOPY --from=a /nonesuch /app/\n", "Dockerfile:3: COPY --from=a /nonesuch /app/: COPY /nonesuch: not found"},
		{"FROM debian:bookworm AS\n", "Dockerfile:1: FROM debian:bookworm AS: want an image and optionally AS name"},
	} {
		_, err := image.Build(context.Background(), task(t, c.dockerfile), image.Options{CacheDir: cache, Base: base})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q:\n got  %v\n want %s", c.dockerfile, err, c.want)
		}
	}
}
