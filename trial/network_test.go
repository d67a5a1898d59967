package trial

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/internal/hostfeature"
)

// networkTask is a task whose solution fetches its answer from url
// through the proxy (the host's loopback is not left to no_proxy here,
// as a registry would not be on it).
func networkTask(t *testing.T, url string, allowInternet *bool) (string, *harbor.Task) {
	t.Helper()
	sol := fmt.Sprintf("#!/bin/bash\nset -e\nmkdir -p /app/out\nNO_PROXY= no_proxy= curl -sSf --max-time 20 %s/name -o /app/data/name.txt\necho \"hello, $(cat /app/data/name.txt)\" > /app/out/greeting.txt\n", url)
	tk, err := harbor.NewBuilder("fetch").
		Instruction("Fetch the name and greet it in `/app/out/greeting.txt`.\n").
		Metadata(harbor.Metadata{Difficulty: "easy", Category: "networking"}).
		Environment(harbor.EnvironmentConfig{AllowInternet: allowInternet}).
		SetupScript("#!/bin/bash\nmkdir -p /app/data\n").
		Solution(sol).
		// The verifier tries the network too: it must have none.
		TestScript(fmt.Sprintf("#!/bin/bash\nNO_PROXY= no_proxy= curl -s --max-time 5 %s/verifier\n", url)+strings.TrimPrefix(localTestSh, "#!/bin/bash\n")).
		TestFile("test_outputs.py", []byte(testFile)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "fetch")
	if err := tk.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir, tk
}

// The oracle of a task that needs a registry passes with network
// registries, its requests in the outcome; with none, or when the task
// declares allow_internet = false, it fails for want of the network.
func TestNetworkPolicyPerRunAndTask(t *testing.T) {
	t.Parallel()
	be := backend(t)
	hostfeature.Require(t, hostfeature.Root())
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the task's solution uses it")
	}
	var verifierHits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/verifier" {
			verifierHits.Add(1)
		}
		fmt.Fprint(w, "t1")
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	no := false
	for _, c := range []struct {
		name       string
		registries []string
		allow      *bool
		solved     bool
		network    string
	}{
		{"registries", []string{host}, nil, true, egress.Registries},
		{"none", nil, nil, false, egress.None},
		{"task refuses", []string{host}, &no, false, egress.None},
	} {
		dir, tk := networkTask(t, srv.URL, c.allow)
		out, err := Run(ctx, dir, tk, Oracle(dir), Options{Backend: be, Registries: c.registries})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if out.Report.Solved != c.solved || out.Network != c.network {
			t.Errorf("%s: solved %v, network %q, output %q", c.name, out.Report.Solved, out.Network, out.SolutionOutput)
		}
		if c.solved && (len(out.Egress) != 1 || !out.Egress[0].Allowed || out.Egress[0].Method != "GET" || out.Egress[0].Bytes != 2) {
			t.Errorf("%s: egress %+v", c.name, out.Egress)
		}
		if !c.solved && len(out.Egress) != 0 {
			t.Errorf("%s: egress %+v", c.name, out.Egress)
		}
	}
	if n := verifierHits.Load(); n != 0 {
		t.Errorf("the verifier reached the network %d times", n)
	}
}
