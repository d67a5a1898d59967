package sandbox_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/infra/sandbox/sandboxtest"
	"github.com/t1pipe/t1/internal/hostfeature"
)

// registriesSandbox starts a bwrap sandbox whose proxy allows allow.
func registriesSandbox(t *testing.T, allow ...string) (sandbox.Sandbox, *egress.Proxy) {
	t.Helper()
	bw := requireBwrap(t)
	hostfeature.Require(t, hostfeature.Root())
	p, err := egress.New(allow)
	if err != nil {
		t.Fatal(err)
	}
	// The test's servers are on the host's loopback, which the proxy
	// variables leave out (a sandbox's own services are there): here
	// they must go through the proxy like a registry.
	env := map[string]string{"no_proxy": "", "NO_PROXY": ""}
	return sandboxtest.Start(t, bw, sandbox.Spec{Proxy: p, Env: env}), p
}

// A sandbox with the registries policy reaches an allowed host through
// the proxy and nothing else: not an outside address directly, not a
// name through DNS, not a host off the list through the proxy. Each
// refusal is in the proxy's log.
func TestRegistriesSandboxReachesOnlyTheAllowList(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: it is the client the sandbox uses here")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "package index\n")
	}))
	defer srv.Close()
	allowed := strings.TrimPrefix(srv.URL, "http://")
	// A second server that is not on the list.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "secret\n")
	}))
	defer other.Close()
	refused := strings.TrimPrefix(other.URL, "http://")

	sb, p := registriesSandbox(t, allowed)
	ctx := context.Background()

	r := run(t, sb, sandbox.Cmd{Script: "curl -sS --max-time 20 " + srv.URL + "/simple/"})
	if r.ExitCode != 0 || r.Stdout != "package index\n" {
		t.Fatalf("allowed host through the proxy: exit %d, stdout %q, stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	// The proxy refuses a host off the list, and says why.
	r = run(t, sb, sandbox.Cmd{Script: "curl -sS --max-time 20 " + other.URL + "/"})
	if strings.Contains(r.Stdout, "secret") || !strings.Contains(r.Stdout, "not on the sandbox's allow-list") {
		t.Fatalf("host off the list through the proxy: exit %d, stdout %q, stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	// So does CONNECT (https) to one.
	r = run(t, sb, sandbox.Cmd{Script: "curl -sS --max-time 20 https://example.com/"})
	if r.ExitCode == 0 || !strings.Contains(r.Stderr, "403") {
		t.Fatalf("https host off the list: exit %d, stdout %q, stderr %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	// Around the proxy: a direct connection to the host's servers (both,
	// the allowed one too), an outside address, and a DNS lookup.
	for _, target := range []string{allowed, refused, "1.1.1.1:80", "8.8.8.8:53"} {
		host, port, _ := net.SplitHostPort(target)
		r = run(t, sb, sandbox.Cmd{Script: fmt.Sprintf("exec 3<>/dev/tcp/%s/%s && echo connected", host, port), Env: []string{"http_proxy="}})
		if r.ExitCode == 0 || strings.Contains(r.Stdout, "connected") {
			t.Errorf("direct connection to %s from the sandbox: exit %d, stdout %q", target, r.ExitCode, r.Stdout)
		}
	}
	r = run(t, sb, sandbox.Cmd{Script: "getent hosts example.com || getent ahosts pypi.org"})
	if r.ExitCode == 0 {
		t.Errorf("DNS lookup from the sandbox succeeded: %q", r.Stdout)
	}
	// A shell gets the proxy too, and keeps it across commands.
	sh, err := sb.Shell(ctx, sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r, err := sh.Run(ctx, "curl -sS --max-time 20 "+srv.URL+"/again", sandbox.RunOptions{})
		if err != nil || r.ExitCode != 0 || r.Stdout != "package index\n" {
			t.Fatalf("allowed host from a shell: %v, exit %d, stdout %q, stderr %q", err, r.ExitCode, r.Stdout, r.Stderr)
		}
	}
	sh.Close()
	sb.Close()

	reqs, omitted := p.Requests()
	if omitted != 0 {
		t.Errorf("%d requests omitted", omitted)
	}
	var ok, no int
	for _, q := range reqs {
		t.Log(q)
		switch {
		case q.Allowed && q.Method == "GET" && net.JoinHostPort(q.Host, fmt.Sprint(q.Port)) == allowed && q.Bytes == int64(len("package index\n")):
			ok++
		case !q.Allowed && q.Reason != "" && (net.JoinHostPort(q.Host, fmt.Sprint(q.Port)) == refused || q.Host == "example.com" && q.Method == "CONNECT" && q.Port == 443):
			no++
		default:
			t.Errorf("unexpected request in the log: %+v", q)
		}
	}
	if ok != 3 || no != 2 {
		t.Errorf("log has %d allowed and %d refused requests, want 3 and 2", ok, no)
	}
}

// Without a proxy (network none) nothing points at one and nothing
// listens where it would.
func TestNoneSandboxHasNoProxy(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.Start(t, requireBwrap(t), sandbox.Spec{})
	r := run(t, sb, sandbox.Cmd{Script: "env | grep -i _proxy; exec 3<>/dev/tcp/127.0.0.1/3128 && echo connected"})
	if r.ExitCode == 0 || r.Stdout != "" {
		t.Fatalf("network none: exit %d, stdout %q", r.ExitCode, r.Stdout)
	}
	if sb.Info().Proxy != nil || strings.Contains(sb.Info().Reason, "proxy") {
		t.Fatalf("network none: info says %q", sb.Info().Reason)
	}
}

// internet says whether this host reaches host:443, for the tests that
// use the real registries.
func internet(t *testing.T, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(h, "443"), 5*time.Second)
		if err != nil {
			t.Skipf("this host does not reach %s (%v): the test installs from the real registry", h, err)
		}
		c.Close()
	}
}

// pip, npm and uvx install pinned packages from the real registries
// through the proxy, with no setting of their own but the environment
// the sandbox gives them.
func TestRegistriesSandboxInstalls(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("downloads from PyPI and npm: skipped with -short")
	}
	internet(t, egress.DefaultHosts...)
	sb, p := registriesSandbox(t, egress.DefaultHosts...)
	steps := []struct{ tool, script string }{
		{"pip", "/usr/bin/python3 -m pip --version && /usr/bin/python3 -m pip install --no-cache-dir --no-deps --target /tmp/py six==1.16.0 && PYTHONPATH=/tmp/py /usr/bin/python3 -c 'import six; print(six.__version__)'"},
		{"npm", "cd /tmp && npm pack --silent is-number@7.0.0 && ls is-number-7.0.0.tgz"},
		// uv from PyPI, then uvx running a pinned tool it fetches itself.
		{"uvx", "/usr/bin/python3 -m pip install --no-cache-dir --target /tmp/uv uv==0.9.7 && UV_CACHE_DIR=/tmp/uv-cache /tmp/uv/bin/uvx --python /usr/bin/python3 --from cowsay==6.1 cowsay -t moo"},
	}
	ran := map[string]bool{}
	for _, s := range steps {
		if _, err := exec.LookPath("npm"); err != nil && s.tool == "npm" {
			t.Logf("npm is not installed on this host: its step is skipped")
			continue
		}
		ran[s.tool] = true
		r := run(t, sb, sandbox.Cmd{Script: s.script, Timeout: 3 * time.Minute})
		if r.ExitCode != 0 {
			t.Fatalf("%s through the proxy: exit %d\n%s\n%s", s.tool, r.ExitCode, r.Stdout, r.Stderr)
		}
		t.Logf("%s: %s", s.tool, strings.TrimSpace(r.Stdout))
	}
	sb.Close()
	reqs, _ := p.Requests()
	seen := map[string]bool{}
	for _, q := range reqs {
		if !q.Allowed || q.Method != "CONNECT" || q.Bytes == 0 {
			t.Errorf("unexpected request: %v", q)
		}
		seen[q.Host] = true
	}
	if !seen["pypi.org"] || !seen["files.pythonhosted.org"] || ran["npm"] && !seen["registry.npmjs.org"] {
		t.Errorf("the log names %v, want pypi.org, files.pythonhosted.org (and registry.npmjs.org, npm ran: %v)", seen, ran["npm"])
	}
}
