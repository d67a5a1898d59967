package image_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/image"
	"github.com/t1pipe/t1/infra/egress"
)

func task(t *testing.T, dockerfile string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "environment"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "environment", "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// RUN reaches the registries through the proxy (pip install from PyPI,
// apt-get from the mirror for the python image's own step) and nothing
// else: a RUN that fetches from another host fails, naming it, and the
// request is in the build's record.
func TestBuildReachesOnlyTheRegistries(t *testing.T) {
	cache, base := image.MachineCache(t)
	for _, h := range []string{"pypi.org", "files.pythonhosted.org"} {
		c, err := net.DialTimeout("tcp", h+":443", 5*time.Second)
		if err != nil {
			t.Skipf("this host does not reach %s (%v): the build installs from PyPI", h, err)
		}
		c.Close()
	}
	ctx := context.Background()
	var log bytes.Buffer
	opt := image.Options{CacheDir: cache, Base: base, Log: &log}
	// An ENV of this run's own makes the step new in the machine's cache.
	nonce := "ENV T1_TEST_RUN=" + strconv.FormatInt(time.Now().UnixNano(), 36) + "\n"
	res, err := image.Build(ctx, task(t, "FROM python:3.11-slim\n"+nonce+"RUN pip install --no-cache-dir six==1.16.0 && python -c 'import six; print(six.__version__)'\n"), opt)
	if err != nil {
		t.Fatalf("pip install at build: %v\n%s", err, log.String())
	}
	seen := map[string]bool{}
	for _, q := range res.Egress {
		if !q.Allowed {
			t.Errorf("refused at build: %v", q)
		}
		seen[q.Host] = true
	}
	if !seen["pypi.org"] || !seen["files.pythonhosted.org"] || !strings.Contains(log.String(), "egress: CONNECT pypi.org:443 allowed") {
		t.Errorf("build egress %v; log:\n%s", res.Egress, log.String())
	}

	log.Reset()
	_, err = image.Build(ctx, task(t, "FROM python:3.11-slim\n"+nonce+"RUN python -c \"import urllib.request; urllib.request.urlopen('https://example.com/', timeout=20)\"\n"), opt)
	if err == nil || !strings.Contains(err.Error(), "the registries proxy refused example.com:443") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("fetch from a host off the list at build: %v", err)
	}
	// Without the proxy variables, nothing: no route and no DNS.
	_, err = image.Build(ctx, task(t, "FROM python:3.11-slim\n"+nonce+"RUN env -u https_proxy -u HTTPS_PROXY python -c \"import urllib.request; urllib.request.urlopen('https://pypi.org/simple/', timeout=20)\"\n"), opt)
	if err == nil || !strings.Contains(err.Error(), "exit code 1") {
		t.Fatalf("fetch around the proxy at build: %v", err)
	}
	if d := egress.DefaultHosts; len(d) != 3 {
		t.Fatalf("default hosts %v", d)
	}
}
