// Package trial runs one attempt at a Harbor task in a fresh sandbox: the
// environment, then a solution (the task's reference solution, another
// task's, or none), then the verifier, whose report it reads back. The
// verifier never runs where the solution or agent ran: it runs in a second
// fresh sandbox holding the attempt's snapshot layer, with the pristine
// tests and a fixed environment (the verifier package's "Guarantees"). That
// costs a second environment build per trial. As in Harbor, test.sh runs
// in the image's WORKDIR; the services a task declares
// ([[verifier.services]], harbor.Service) are started in the verifier's
// sandbox before it, from the attempt's files, and live as long as it
// does. A test.sh that fails without writing a result leaves the end of
// its output and the reason in the report (verifier.Report.Explain).
//
// It is the single place where the task format, the sandbox and the
// verifier reports meet, so synthesis (keep a child only if its oracle
// passes and its parent's solution fails), audit (oracle, rerun and null
// runs), `t1 tasks check` and reward all judge a task the same way.
package trial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/infra/sandbox"
)

// Offline says when the verifier runs tests/test.sh with stand-ins for
// the network installers it calls (curl … | sh of uv's installer, uv,
// uvx, pip, apt-get: see the verifier package's "Offline verification"),
// which succeed when what they are asked for is on the sandbox's image.
type Offline string

const (
	// OfflineAuto does so when test.sh fetches software from the network,
	// which a sandbox without network cannot do.
	OfflineAuto   Offline = "auto"
	OfflineAlways Offline = "always"
	OfflineNever  Offline = "never"
)

// Options configure a trial.
type Options struct {
	Backend sandbox.Backend
	// Limits bound every process; zero fields take the sandbox defaults.
	// The task's [environment] memory is not applied: the sandbox bounds
	// address space, which over-counts what a task's memory figure means.
	Limits sandbox.Limits
	// Offline defaults to OfflineAuto.
	Offline Offline
	// SolveTimeout and VerifyTimeout default to the task's [agent] and
	// [verifier] timeout_sec.
	SolveTimeout, VerifyTimeout time.Duration
	// TempDir holds per-attempt directories; empty means os.TempDir().
	TempDir string
	// AllowUnisolated lets a sandbox that isolates nothing (the process
	// backend) run solutions, agents and verifiers. Without it Start
	// refuses one, whatever backend was handed in.
	AllowUnisolated bool
	// Registries, when set, gives the solution's or agent's sandbox the
	// network policy registries: these hosts through a proxy of its own
	// (infra/egress), whose log is the attempt's (Outcome.Egress). A task
	// whose task.toml says [environment] allow_internet = false gets no
	// network all the same. The verifier's sandbox never has any.
	Registries []string
}

// Start starts a fresh sandbox of the task in taskDir with the options'
// backend and limits. It fails closed: unless AllowUnisolated is set, a
// backend that does not isolate is refused before anything of the task
// runs, and a sandbox that reports no isolation is closed again (both
// wrap sandbox.ErrUnisolated).
func (o Options) Start(ctx context.Context, taskDir string) (sandbox.Sandbox, error) {
	spec := sandbox.Spec{TaskDir: taskDir}
	// The solution's or agent's sandbox: the verifier's starts through
	// start alone and never has a network.
	if o.Registries != nil {
		var err error
		if spec.Proxy, err = o.proxy(taskDir); err != nil {
			return nil, err
		}
	}
	return o.start(ctx, spec)
}

func (o Options) start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if o.Backend == nil {
		return nil, errors.New("trial: no sandbox backend")
	}
	// Start already builds the task's environment, so an unisolated
	// backend is refused before it, and a sandbox that reports no
	// isolation after it.
	if !o.Backend.Isolates() && !o.AllowUnisolated {
		return nil, fmt.Errorf("%w (backend %s): refusing it; install bubblewrap, or allow unisolated execution explicitly", sandbox.ErrUnisolated, o.Backend.Name())
	}
	spec.Limits, spec.TempDir = o.Limits, o.TempDir
	sb, err := o.Backend.Start(ctx, spec)
	if err != nil {
		if spec.Proxy != nil {
			spec.Proxy.Close()
		}
		return nil, err
	}
	if info := sb.Info(); !info.Isolated && !o.AllowUnisolated {
		sb.Close()
		return nil, fmt.Errorf("%w (%s): refusing it; install bubblewrap, or allow unisolated execution explicitly", sandbox.ErrUnisolated, info.Reason)
	}
	return sb, nil
}

// proxy is the registries proxy of a sandbox of the task in taskDir, or
// nil where the task refuses the network.
func (o Options) proxy(taskDir string) (*egress.Proxy, error) {
	if taskDir != "" {
		t, err := harbor.Load(taskDir)
		if err != nil {
			return nil, err
		}
		if ai := t.Config.Environment.AllowInternet; ai != nil && !*ai {
			return nil, nil
		}
	}
	return egress.New(o.Registries)
}

// Network is the network policy of a sandbox (egress.None or
// egress.Registries) and its proxy's log, closing the proxy first so
// that every request is in it; sb must be done with the network.
func Network(sb sandbox.Sandbox) (policy string, reqs []egress.Request, omitted int) {
	p := sb.Info().Proxy
	if p == nil {
		return egress.None, nil, 0
	}
	p.Close()
	reqs, omitted = p.Requests()
	return egress.Registries, reqs, omitted
}

// NoSolution is Outcome.SolutionExit when no solution ran.
const NoSolution = -2

// Outcome is what one trial showed.
type Outcome struct {
	// SolutionExit is the solution's exit status, -1 when it was killed,
	// NoSolution when none ran.
	SolutionExit     int
	SolutionTimedOut bool
	// SolutionOutput is the solution's stdout and stderr, bounded.
	SolutionOutput string
	// Report is the verifier's result; it always exists once the verifier
	// ran (the exit code ends its precedence chain).
	Report           *verifier.Report
	VerifierTimedOut bool
	// Offline is set when stand-ins answered test.sh's network installers.
	Offline bool
	// Isolated is false when the sandbox backend isolates nothing.
	Isolated bool
	// Notes say how the environment was built (Info().Notes): what of
	// the Dockerfile was left out, and what stands in for its image.
	Notes []string
	// Network is the solution's sandbox's network policy (egress.None
	// or egress.Registries); Egress is every request its proxy answered,
	// EgressOmitted those past egress.MaxRequests.
	Network       string
	Egress        []egress.Request
	EgressOmitted int
	Duration      time.Duration
}

// Solution is the script a trial runs before the verifier.
type Solution struct {
	// Dir is a host directory uploaded as /solution (a task's solution/);
	// Script, when set, is written there as solve.sh instead.
	Dir    string
	Script []byte
}

// Oracle is the task's own reference solution.
func Oracle(taskDir string) *Solution {
	return &Solution{Dir: filepath.Join(taskDir, "solution")}
}

// Run starts a fresh sandbox of the task in taskDir (already loaded as
// t), runs sol (nil: none) and then the verifier, which runs in a second
// fresh sandbox holding what the solution left (Verify). The error is for
// failures to run at all (the sandbox would not start, a copy failed); a
// solution or verifier that fails is an Outcome.
func Run(ctx context.Context, taskDir string, t *harbor.Task, sol *Solution, opt Options) (Outcome, error) {
	start := time.Now()
	sb, err := opt.Start(ctx, taskDir)
	if err != nil {
		return Outcome{}, fmt.Errorf("trial %s: %w", t.Name, err)
	}
	defer sb.Close()
	out := Outcome{SolutionExit: NoSolution, Isolated: sb.Info().Isolated, Notes: sb.Info().Notes}
	if sol != nil {
		if err := out.solve(ctx, sb, t, sol, opt); err != nil {
			return out, fmt.Errorf("trial %s: %w", t.Name, err)
		}
	}
	// The solution's sandbox is closed, and every process it left with
	// it, before the verifier starts.
	layer, release, err := snapshot(ctx, sb, opt.TempDir)
	sb.Close()
	out.Network, out.Egress, out.EgressOmitted = Network(sb)
	if err != nil {
		return out, fmt.Errorf("trial %s: %w", t.Name, err)
	}
	defer release()
	rep, timedOut, offline, err := VerifyLayer(ctx, layer, taskDir, t, opt)
	if err != nil {
		return out, fmt.Errorf("trial %s: %w", t.Name, err)
	}
	out.Report, out.VerifierTimedOut, out.Offline = rep, timedOut, offline
	out.Duration = time.Since(start)
	return out, nil
}

func (out *Outcome) solve(ctx context.Context, sb sandbox.Sandbox, t *harbor.Task, sol *Solution, opt Options) error {
	src := sol.Dir
	if sol.Script != nil {
		dir, releaseDir, err := hostres.MkdirTemp(opt.TempDir, "t1-solution-", "solution scratch")
		if err != nil {
			return err
		}
		defer releaseDir()
		if err := os.WriteFile(filepath.Join(dir, "solve.sh"), sol.Script, 0o755); err != nil {
			return err
		}
		src = dir
	}
	if err := sb.Upload(ctx, src, "/solution"); err != nil {
		return fmt.Errorf("upload solution: %w", err)
	}
	timeout := opt.SolveTimeout
	if timeout == 0 {
		timeout = t.Config.AgentTimeout()
	}
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"bash", "/solution/solve.sh"}, Timeout: timeout})
	if err != nil {
		return fmt.Errorf("run solution: %w", err)
	}
	out.SolutionExit, out.SolutionTimedOut = res.ExitCode, res.TimedOut
	out.SolutionOutput = res.Stdout + res.Stderr
	return nil
}

// ErrLayer marks a snapshot layer that would not restore.
var ErrLayer = errors.New("trial: snapshot layer does not restore")

// Verify judges the state an attempt left in sb. The verifier never runs
// in sb itself: sb's writable directories are taken as a snapshot layer
// and the verifier runs on that layer in a fresh sandbox (VerifyLayer), so
// no process of the attempt (its shell, a background job rewriting the
// tests or the report) is alive there. Callers close sb themselves.
func Verify(ctx context.Context, sb sandbox.Sandbox, taskDir string, t *harbor.Task, opt Options) (rep *verifier.Report, timedOut, offline bool, err error) {
	layer, release, err := snapshot(ctx, sb, opt.TempDir)
	if err != nil {
		return nil, false, false, err
	}
	defer release()
	return VerifyLayer(ctx, layer, taskDir, t, opt)
}

// snapshot writes sb's layer to a temporary file in dir, rewound;
// release closes and removes it.
func snapshot(ctx context.Context, sb sandbox.Sandbox, dir string) (*os.File, func(), error) {
	f, release, err := hostres.CreateTemp(dir, "t1-layer-", "snapshot for the verifier")
	if err != nil {
		return nil, nil, err
	}
	err = sb.Snapshot(ctx, f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("snapshot for the verifier: %w", err)
	}
	return f, release, nil
}

// VerifyLayer starts a fresh sandbox of the task, restores layer (an
// attempt's snapshot) into it and runs the verifier there (see the
// verifier package's "Guarantees"): the task's tests from taskDir, not
// from the layer; an empty HOME; the image's WORKDIR as the working
// directory, as Harbor has it; a fixed PATH and a scrubbed environment
// with the verifier's own commands first on PATH (for an offline
// verifier, the stand-ins for network installers). A layer that does not restore is
// ErrLayer; a refused unisolated sandbox wraps sandbox.ErrUnisolated.
func VerifyLayer(ctx context.Context, layer io.Reader, taskDir string, t *harbor.Task, opt Options) (rep *verifier.Report, timedOut, offline bool, err error) {
	// An image backend gives an offline verifier what its installers
	// would have fetched (sandbox.Spec.Verifier).
	sb, err := opt.start(ctx, sandbox.Spec{TaskDir: taskDir, Verifier: opt.offline(t)})
	if err != nil {
		return nil, false, false, fmt.Errorf("sandbox for the verifier: %w", err)
	}
	defer sb.Close()
	if layer != nil {
		if err := sb.Restore(ctx, layer); err != nil {
			return nil, false, false, fmt.Errorf("%w: %w", ErrLayer, err)
		}
	}
	return verify(ctx, sb, taskDir, t, opt)
}

// verify runs the verifier in sb, where no process of the attempt ever ran.
func verify(ctx context.Context, sb sandbox.Sandbox, taskDir string, t *harbor.Task, opt Options) (rep *verifier.Report, timedOut, offline bool, err error) {
	// Upload replaces /tests whole: a conftest.py or a rewritten test the
	// layer put there is gone.
	if err := sb.Upload(ctx, filepath.Join(taskDir, harbor.TestsDir), "/tests"); err != nil {
		return nil, false, false, fmt.Errorf("upload tests: %w", err)
	}
	info := sb.Info()
	p := info.CommandPath
	home := p(verifier.Home)
	env := verifier.Env(t, home)
	// The agent could have left reports behind (a ctrf.json claiming
	// every test passed), or a HOME at the verifier's: both start empty.
	// Even this step runs with the verifier's environment, or a BASH_ENV
	// the task's Dockerfile set would source the agent's files here.
	reset := fmt.Sprintf("chmod -R u+rwX %[1]s 2>/dev/null; rm -rf %[2]s %[3]s && mkdir -p %[2]s %[4]s",
		p("/logs"), p("/logs/verifier"), path.Dir(home), home)
	if res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"/bin/bash", "--norc", "--noprofile", "-c", reset}, Env: env}); err != nil || res.ExitCode != 0 {
		return nil, false, false, fmt.Errorf("reset verifier logs: %v %s", err, res.Stderr)
	}
	// test.sh runs in the image's WORKDIR (the sandbox's default
	// directory), as Harbor runs it: tests compile and open files by
	// relative paths there.
	cmd := sandbox.Cmd{Args: []string{"/bin/bash", "--norc", "--noprofile", p("/tests/test.sh")}, Env: verifier.TestEnv(t, home, p(verifier.ShimDir))}
	// The verifier's own commands are first on PATH, written after the
	// reset above, so nothing of the attempt's is among them: for an
	// offline verifier the stand-ins for its network installers (test.sh
	// runs whole, every step of it), else the python3 guard that keeps
	// the working directory from shadowing pytest.
	offline = opt.offline(t)
	if err := uploadShims(ctx, sb, opt.TempDir, info.Aliases["python"] != "", offline); err != nil {
		return nil, false, false, err
	}
	// The guard stands in for the interpreter files themselves too, so
	// that a test.sh naming /usr/bin/python3 gets it as one naming
	// python3 does. Only an isolating sandbox can replace a program for
	// one command; the process backend guarantees nothing of this.
	if info.Isolated {
		if cmd.StandIns, err = interpreterStandIns(ctx, sb, env); err != nil {
			return nil, false, false, err
		}
	}
	if svcs := t.Config.Services(); len(svcs) > 0 {
		// The services run in the same command as test.sh, so they live
		// as long as it does and end with the sandbox's pid namespace.
		args := []string{"/bin/bash", "--norc", "--noprofile", "-c", servicesScript, "t1-verifier", p("/tests/test.sh"), p(verifier.Home)}
		for _, sv := range svcs {
			args = append(args, sv.Command, strconv.Itoa(sv.Port))
		}
		cmd.Args = args
	}
	cmd.Timeout = opt.VerifyTimeout
	if cmd.Timeout == 0 {
		cmd.Timeout = t.Config.VerifierTimeout()
	}
	hostres.Point("trial.verifier")
	res, err := sb.Exec(ctx, cmd)
	if err != nil {
		return nil, false, offline, fmt.Errorf("run verifier: %w", err)
	}
	logs, releaseLogs, err := hostres.MkdirTemp(opt.TempDir, "t1-verifier-", "verifier scratch")
	if err != nil {
		return nil, false, offline, err
	}
	defer releaseLogs()
	if err := sb.Download(ctx, "/logs/verifier", filepath.Join(logs, "v")); err != nil {
		return nil, false, offline, fmt.Errorf("read verifier logs: %w", err)
	}
	rep = verifier.Parse(filepath.Join(logs, "v"), res.ExitCode)
	// A test.sh that stopped before its tests wrote anything leaves its
	// output as the only account of why.
	rep.Explain(res.Stdout + res.Stderr)
	// What of the attempt's root changes the verifier's sandbox refused
	// to apply (sandbox Restore) may explain a failing test.
	for _, n := range sb.Info().Notes {
		if strings.HasPrefix(n, sandbox.RestoreNote) {
			rep.Problems = append(rep.Problems, n)
		}
	}
	for l := range strings.SplitSeq(res.Stderr, "\n") {
		if strings.HasPrefix(l, servicePrefix) && len(rep.Problems) < 64 {
			rep.Problems = append(rep.Problems, strings.TrimPrefix(l, "t1 verifier: "))
		}
	}
	if res.TimedOut {
		rep.Problems = append(rep.Problems, fmt.Sprintf("verifier timed out after %s", cmd.Timeout))
	}
	return rep, res.TimedOut, offline, nil
}

// servicePrefix begins servicesScript's lines about a service that did
// not start, which the report's Problems repeat.
const servicePrefix = "t1 verifier: service "

// servicesScript starts the task's declared services (harbor.Service)
// before test.sh: bash -c servicesScript NAME TEST_SH HOME [COMMAND PORT]...
// Each command runs in the background in the working directory, its
// output in a log beside HOME; with a port, the script waits up to 30 s
// for 127.0.0.1:PORT to accept a connection, less when the command fails
// (a non-zero exit status). A service that does not come up is said on stderr (servicePrefix) and test.sh runs anyway: its
// tests fail on what is missing. The script's exit status is test.sh's.
const servicesScript = `test_sh=$1 log=${2%/*}/services.log
shift 2
i=0
while [ $# -ge 2 ]; do
	i=$((i + 1)) cmd=$1 port=$2
	shift 2
	/bin/bash --norc --noprofile -c "$cmd" </dev/null >>"$log" 2>&1 &
	pid=$! st= up=
	[ "$port" = 0 ] && continue
	for _ in $(seq 300); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
		# A command that daemonized exits 0 and its service comes up
		# later; one that failed will not.
		if [ -z "$st" ] && ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			st=$?
			[ "$st" = 0 ] || break
		fi
		sleep 0.1
	done
	why="after 30 s"
	[ -n "$st" ] && why="exit status $st"
	[ -n "$up" ] || printf 't1 verifier: service %d (%s) is not listening on port %s (%s); its output ends: %s\n' \
		"$i" "$cmd" "$port" "$why" "$(tail -c 300 "$log" | tr '\n' ' ')" >&2
done
/bin/bash --norc --noprofile "$test_sh"
`

// interpreterStandIns lists the Python interpreters in the verifier's
// PATH directories of sb (as the sandbox has them, after the attempt's
// layer) and maps each to the interpreter guard.
func interpreterStandIns(ctx context.Context, sb sandbox.Sandbox, env []string) (map[string]string, error) {
	list := `IFS=:; for d in $0; do for f in "$d"/python*; do [ -f "$f" ] && [ -x "$f" ] && printf '%s\n' "$f"; done; done; true`
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"/bin/bash", "--norc", "--noprofile", "-c", list, verifier.Path}, Env: env})
	if err != nil || res.ExitCode != 0 {
		return nil, fmt.Errorf("list the verifier's interpreters: %v %s", err, res.Stderr)
	}
	standIns := map[string]string{}
	for p := range strings.SplitSeq(strings.TrimSpace(res.Stdout), "\n") {
		if path.IsAbs(p) && verifier.IsInterpreter(p) {
			standIns[p] = path.Join(verifier.ShimDir, verifier.InterpreterGuard)
		}
	}
	return standIns, nil
}

// uploadShims puts the verifier's own commands at verifier.ShimDir: the
// stand-ins for network installers when it runs offline, else the
// python3 guard; and the guard that stands in for the interpreters
// themselves.
func uploadShims(ctx context.Context, sb sandbox.Sandbox, tmp string, python, offline bool) error {
	dir, releaseDir, err := hostres.MkdirTemp(tmp, "t1-shims-", "shims scratch")
	if err != nil {
		return err
	}
	defer releaseDir()
	write := verifier.WriteGuards
	if offline {
		write = verifier.WriteShims
	}
	if err := write(dir, python); err != nil {
		return err
	}
	if err := verifier.WriteInterpreterGuard(dir, sandbox.OriginalsDir); err != nil {
		return err
	}
	if err := sb.Upload(ctx, dir, verifier.ShimDir); err != nil {
		return fmt.Errorf("upload verifier shims: %w", err)
	}
	return nil
}

// offline says whether the verifier runs with stand-ins for test.sh's
// network installers.
func (o Options) offline(t *harbor.Task) bool {
	if o.Offline == OfflineAlways {
		return true
	}
	need, _ := verifier.NeedsOffline(t)
	return o.Offline != OfflineNever && need
}
