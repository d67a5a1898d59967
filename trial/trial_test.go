package trial

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/internal/testinfra"
)

func backend(t *testing.T) sandbox.Backend {
	t.Helper()
	bw := testinfra.Bubblewrap(t)
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3 (make setup installs python3-pytest)")
	}
	return bw
}

const testFile = `from pathlib import Path


def test_greeting():
    assert Path("/app/out/greeting.txt").read_text().strip() == "hello, t1"


def test_input_kept():
    assert Path("/app/data/name.txt").read_text().strip() == "t1"
`

func writeTask(t *testing.T, testSh string) (string, *harbor.Task) {
	return writeTaskIn(t, testSh, "")
}

// writeTaskIn is writeTask with the environment built by dockerfile
// instead of a setup script, when it is set.
func writeTaskIn(t *testing.T, testSh, dockerfile string) (string, *harbor.Task) {
	t.Helper()
	b := harbor.NewBuilder("greet").
		Instruction("Read the name in `/app/data/name.txt` and write `hello, <name>` to `/app/out/greeting.txt`.\n").
		Metadata(harbor.Metadata{Difficulty: "easy", Category: "text-processing"})
	if dockerfile != "" {
		b.Dockerfile(dockerfile)
	} else {
		b.SetupScript("#!/bin/bash\nmkdir -p /app/data\necho t1 > /app/data/name.txt\n")
	}
	tk, err := b.Solution("#!/bin/bash\nset -e\nmkdir -p /app/out\necho \"hello, $(cat /app/data/name.txt)\" > /app/out/greeting.txt\n").
		TestScript(testSh).
		TestFile("test_outputs.py", []byte(testFile)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "greet")
	if err := tk.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir, tk
}

const localTestSh = "#!/bin/bash\ncd /tests && python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml /tests/test_outputs.py\n"

// A Terminal-Bench style test.sh that fetches its tools at verify time.
const networkTestSh = "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\nsource $HOME/.local/bin/env\nuvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA\n"

func TestOracleNullAndWrongSolution(t *testing.T) {
	t.Parallel()
	be := backend(t)
	dir, tk := writeTask(t, localTestSh)
	opt := Options{Backend: be}
	wrong := &Solution{Script: []byte("#!/bin/bash\nmkdir -p /app/out\necho 'hello, world' > /app/out/greeting.txt\nexit 3\n")}
	for _, c := range []struct {
		name string
		sol  *Solution
		ok   func(*Outcome) bool
	}{
		{"oracle", Oracle(dir), func(out *Outcome) bool {
			return out.SolutionExit == 0 && out.Report.Solved && out.Report.Total == 2 && out.Report.Passed == 2
		}},
		{"null", nil, func(out *Outcome) bool {
			return out.SolutionExit == NoSolution && !out.Report.Solved && out.Report.Passed == 1 && out.Report.Failed == 1
		}},
		{"wrong", wrong, func(out *Outcome) bool {
			return out.SolutionExit == 3 && !out.Report.Solved && out.Report.Passed == 1
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := Run(ctx, dir, tk, c.sol, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !c.ok(&out) {
				t.Fatalf("exit %d, report %+v, output %q", out.SolutionExit, out.Report, out.SolutionOutput)
			}
		})
	}
}

// A test.sh that needs the network runs offline with the local pytest and
// still gives one result per test.
func TestOfflineVerifier(t *testing.T) {
	t.Parallel()
	be := backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, tk := writeTask(t, networkTestSh)
	out, err := Run(ctx, dir, tk, Oracle(dir), Options{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Offline || !out.Report.Solved || out.Report.Total != 2 {
		t.Fatalf("offline: %v, report %+v", out.Offline, out.Report)
	}
	out, err = Run(ctx, dir, tk, Oracle(dir), Options{Backend: be, Offline: OfflineNever})
	if err != nil {
		t.Fatal(err)
	}
	if out.Offline || out.Report.Solved {
		t.Fatalf("test.sh without network should fail: %+v", out.Report)
	}
}

// Reports an agent leaves in /logs/verifier never reach the verdict.
func TestForgedReportIgnored(t *testing.T) {
	t.Parallel()
	be := backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, tk := writeTask(t, localTestSh)
	forge := &Solution{Script: []byte(`#!/bin/bash
mkdir -p /logs/verifier
echo '{"results":{"tool":{"name":"x"},"summary":{"tests":2,"passed":2,"failed":0},"tests":[{"name":"test_greeting","status":"passed"},{"name":"test_input_kept","status":"passed"}]}}' > /logs/verifier/ctrf.json
echo 1 > /logs/verifier/reward.txt
`)}
	out, err := Run(ctx, dir, tk, forge, Options{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	if out.Report.Solved || out.Report.Source != "junit" {
		t.Fatalf("a forged report was believed: %+v", out.Report)
	}
}

// A verifier that crashes, hangs or writes garbage still gives a report:
// the exit code ends the precedence chain, with the problem noted.
func TestBrokenVerifiers(t *testing.T) {
	t.Parallel()
	be := backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cases := map[string]struct {
		testSh  string
		timeout time.Duration
		check   func(o Outcome) bool
	}{
		"crash": {"#!/bin/bash\nkill -SEGV $$\n", 0, func(o Outcome) bool {
			return !o.Report.Solved && o.Report.Fallback && o.Report.ExitCode != 0
		}},
		"hang": {"#!/bin/bash\nsleep 600\n", 2 * time.Second, func(o Outcome) bool {
			return o.VerifierTimedOut && !o.Report.Solved && len(o.Report.Problems) > 0
		}},
		"garbage": {"#!/bin/bash\nhead -c 4096 /dev/urandom > /logs/verifier/junit.xml\necho '{not json' > /logs/verifier/ctrf.json\nexit 0\n", 0, func(o Outcome) bool {
			return o.Report.Source == "exit_code" && len(o.Report.Problems) >= 2
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			// The hang waits out its timeout; the others need not wait for it.
			t.Parallel()
			dir, tk := writeTask(t, c.testSh)
			out, err := Run(ctx, dir, tk, Oracle(dir), Options{Backend: be, VerifyTimeout: c.timeout})
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(out) {
				t.Fatalf("%s: %+v", name, out.Report)
			}
		})
	}
}

// A sandbox that isolates nothing is refused unless allowed: a backend
// handed in through the Go API cannot bypass the configuration's choice.
func TestStartRefusesUnisolated(t *testing.T) {
	ctx := context.Background()
	if sb, err := (Options{Backend: &sandbox.Plain{}}).Start(ctx, ""); !errors.Is(err, sandbox.ErrUnisolated) {
		if sb != nil {
			sb.Close()
		}
		t.Fatalf("unisolated sandbox started: %v", err)
	}
	sb, err := (Options{Backend: &sandbox.Plain{}, AllowUnisolated: true}).Start(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
}

// A verifier (or what the agent left running during it) replaces
// /logs/verifier with a link to a host directory: the host must neither
// take its reward from there nor echo the host's files into the report.
func TestVerifierLogsLinkedToHost(t *testing.T) {
	be := backend(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	host := t.TempDir()
	const secret = "host-secret-6f1c2a"
	if err := os.WriteFile(filepath.Join(host, "reward.json"), []byte(`{"reward": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "reward.txt"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, tk := writeTask(t, "#!/bin/bash\nrm -rf /logs/verifier\nln -s "+host+" /logs/verifier\nexit 1\n")
	out, err := Run(ctx, dir, tk, Oracle(dir), Options{Backend: be})
	if err != nil {
		t.Fatal(err)
	}
	if out.Report.Solved || out.Report.Reward != nil {
		t.Errorf("the reward came from a host directory: %+v", out.Report)
	}
	for _, p := range out.Report.Problems {
		if strings.Contains(p, secret) {
			t.Errorf("the report echoes a host file: %q", p)
		}
	}
}
