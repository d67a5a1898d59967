package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/t1pipe/t1/infra/sandbox"
)

// t1Sandbox runs a t1 sandbox command in process with stdin, returning its
// output and the exit code it asked for.
func t1Sandbox(t *testing.T, stdin string, args ...string) (string, int, error) {
	t.Helper()
	code := 0
	old := sandboxExit
	sandboxExit = func(c int) { code = c }
	defer func() { sandboxExit = old }()
	root := newRoot()
	var out lockedBuffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{"--log-level", "error"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), code, err
}

func TestSandboxRunAndShell(t *testing.T) {
	task := t.TempDir()
	if err := os.MkdirAll(filepath.Join(task, "environment"), 0o755); err != nil {
		t.Fatal(err)
	}
	// $HOME is the sandbox's /root under both backends (mapped under the
	// plain one), so the same script works for either.
	if err := os.WriteFile(filepath.Join(task, "environment", "setup.sh"), []byte("echo from-setup > \"$HOME/greeting\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The process backend isolates nothing: asked for without the allow
	// option it is refused before anything runs.
	if _, _, err := t1Sandbox(t, "", "sandbox", "run", "--backend", "process", "--", "true"); err == nil || !strings.Contains(err.Error(), "allow_unisolated") {
		t.Errorf("process without --allow-unisolated: %v", err)
	}
	backends := []string{"process"}
	if (&sandbox.Bubblewrap{}).Available() == nil || os.Getenv("T1_REQUIRE_BWRAP") == "1" {
		backends = append(backends, "auto")
	}
	for _, backend := range backends {
		t1Sandbox := func(t *testing.T, stdin string, args ...string) (string, int, error) {
			return t1Sandbox(t, stdin, append([]string{"--allow-unisolated"}, args...)...)
		}
		out, code, err := t1Sandbox(t, "", "sandbox", "run", "--task", task, "--backend", backend, "--", "bash", "-c", "cat \"$HOME/greeting\"; echo err >&2; exit 3")
		if err != nil || code != 3 || !strings.Contains(out, "from-setup\n") || !strings.Contains(out, "err\n") {
			t.Errorf("%s: run: code %d, %v\n%s", backend, code, err, out)
		}
		out, code, err = t1Sandbox(t, "", "sandbox", "run", "--backend", backend, "--timeout", "300ms", "--", "sleep", "100")
		if err != nil || code != 124 || !strings.Contains(out, "timed out") {
			t.Errorf("%s: timeout: code %d, %v\n%s", backend, code, err, out)
		}
		out, code, err = t1Sandbox(t, "piped-in", "--json", "sandbox", "run", "--backend", backend, "--", "cat")
		var res struct {
			Backend  string `json:"backend"`
			Stdout   string `json:"stdout"`
			ExitCode int    `json:"exit_code"`
		}
		if err != nil || code != 0 || json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res) != nil || res.Stdout != "piped-in" {
			t.Errorf("%s: --json: code %d, %v\n%s", backend, code, err, out)
		}
		out, _, err = t1Sandbox(t, "cd \"$HOME\"; X=7\necho shell-$X $(cat greeting)\nexit\n", "sandbox", "shell", "--task", task, "--backend", backend)
		if err != nil || !strings.Contains(out, "shell-7 from-setup") {
			t.Errorf("%s: shell: %v\n%s", backend, err, out)
		}
	}
	if _, _, err := t1Sandbox(t, "", "sandbox", "run", "--backend", "docker", "--", "true"); err == nil || !strings.Contains(err.Error(), `unknown backend "docker"`) {
		t.Errorf("bad backend: %v", err)
	}
}

// A task whose build context links to a host directory: `t1 sandbox run
// --task` builds it without any task check first, so the sandbox itself
// must refuse to COPY through the link (it runs COPY as the host user).
func TestSandboxRunRefusesLinkedBuildContext(t *testing.T) {
	if (&sandbox.Bubblewrap{}).Available() != nil && os.Getenv("T1_REQUIRE_BWRAP") != "1" {
		t.Skip("bubblewrap unavailable (make setup installs it)")
	}
	host := t.TempDir()
	const secret = "host-only-4c1d9e"
	if err := os.WriteFile(filepath.Join(host, "secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	task := t.TempDir()
	env := filepath.Join(task, "environment")
	if err := os.MkdirAll(env, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(env, "h")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(env, "Dockerfile"), []byte("FROM ubuntu:24.04\nCOPY h/secret /app/secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code, err := t1Sandbox(t, "", "sandbox", "run", "--task", task, "--backend", "bwrap", "--", "cat", "/app/secret")
	if strings.Contains(out, secret) {
		t.Fatalf("the sandbox printed a host file: %s", out)
	}
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("want the build refused for the link, got code %d, %v\n%s", code, err, out)
	}
}
