// Package trial runs one attempt at a Harbor task in a fresh sandbox: the
// environment, then a solution (the task's reference solution, another
// task's, or none), then the verifier, whose report it reads back.
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
	"os"
	"path/filepath"
	"time"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/infra/sandbox"
)

// Offline says when the verifier runs the task's pytest files with the
// sandbox's own pytest instead of tests/test.sh.
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
}

// Start starts a fresh sandbox of the task in taskDir with the options'
// backend and limits. It fails closed: unless AllowUnisolated is set, a
// backend that does not isolate is refused before anything of the task
// runs, and a sandbox that reports no isolation is closed again (both
// wrap sandbox.ErrUnisolated).
func (o Options) Start(ctx context.Context, taskDir string) (sandbox.Sandbox, error) {
	if o.Backend == nil {
		return nil, errors.New("trial: no sandbox backend")
	}
	// Start already builds the task's environment, so an unisolated
	// backend is refused before it, and a sandbox that reports no
	// isolation after it.
	if !o.Backend.Isolates() && !o.AllowUnisolated {
		return nil, fmt.Errorf("%w (backend %s): refusing it; install bubblewrap, or allow unisolated execution explicitly", sandbox.ErrUnisolated, o.Backend.Name())
	}
	sb, err := o.Backend.Start(ctx, sandbox.Spec{TaskDir: taskDir, Limits: o.Limits, TempDir: o.TempDir})
	if err != nil {
		return nil, err
	}
	if info := sb.Info(); !info.Isolated && !o.AllowUnisolated {
		sb.Close()
		return nil, fmt.Errorf("%w (%s): refusing it; install bubblewrap, or allow unisolated execution explicitly", sandbox.ErrUnisolated, info.Reason)
	}
	return sb, nil
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
	// Offline is set when the local pytest stood in for test.sh.
	Offline bool
	// Isolated is false when the sandbox backend isolates nothing.
	Isolated bool
	Duration time.Duration
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
// t), runs sol (nil: none) and then the verifier. The error is for
// failures to run at all (the sandbox would not start, a copy failed);
// a solution or verifier that fails is an Outcome.
func Run(ctx context.Context, taskDir string, t *harbor.Task, sol *Solution, opt Options) (Outcome, error) {
	start := time.Now()
	sb, err := opt.Start(ctx, taskDir)
	if err != nil {
		return Outcome{}, fmt.Errorf("trial %s: %w", t.Name, err)
	}
	defer sb.Close()
	out := Outcome{SolutionExit: NoSolution, Isolated: sb.Info().Isolated}
	if sol != nil {
		if err := out.solve(ctx, sb, t, sol, opt); err != nil {
			return out, fmt.Errorf("trial %s: %w", t.Name, err)
		}
	}
	rep, timedOut, offline, err := Verify(ctx, sb, taskDir, t, opt)
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
		dir, err := os.MkdirTemp(opt.TempDir, "t1-solution-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
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

// Verify uploads the task's tests into sb, runs the verifier and reads
// its report. Rollouts call it on the sandbox the agent worked in.
func Verify(ctx context.Context, sb sandbox.Sandbox, taskDir string, t *harbor.Task, opt Options) (rep *verifier.Report, timedOut, offline bool, err error) {
	if err := sb.Upload(ctx, filepath.Join(taskDir, harbor.TestsDir), "/tests"); err != nil {
		return nil, false, false, fmt.Errorf("upload tests: %w", err)
	}
	// The agent could have left reports behind (a ctrf.json claiming
	// every test passed): the verifier starts from an empty directory.
	if res, err := sb.Exec(ctx, sandbox.Cmd{Script: "chmod -R u+rwX /logs 2>/dev/null; rm -rf /logs/verifier && mkdir -p /logs/verifier"}); err != nil || res.ExitCode != 0 {
		return nil, false, false, fmt.Errorf("reset verifier logs: %v %s", err, res.Stderr)
	}
	cmd := sandbox.Cmd{Script: "exec bash /tests/test.sh"}
	switch mode := opt.Offline; {
	case mode == OfflineAlways, mode != OfflineNever && needsOffline(t):
		plan, err := verifier.OfflinePytest(t, verifier.PytestOptions{})
		if err != nil {
			return nil, false, false, err
		}
		cmd, offline = sandbox.Cmd{Script: plan.Script}, true
	}
	cmd.Timeout = opt.VerifyTimeout
	if cmd.Timeout == 0 {
		cmd.Timeout = t.Config.VerifierTimeout()
	}
	res, err := sb.Exec(ctx, cmd)
	if err != nil {
		return nil, false, offline, fmt.Errorf("run verifier: %w", err)
	}
	logs, err := os.MkdirTemp(opt.TempDir, "t1-verifier-")
	if err != nil {
		return nil, false, offline, err
	}
	defer os.RemoveAll(logs)
	if err := sb.Download(ctx, "/logs/verifier", filepath.Join(logs, "v")); err != nil {
		return nil, false, offline, fmt.Errorf("read verifier logs: %w", err)
	}
	rep = verifier.Parse(filepath.Join(logs, "v"), res.ExitCode)
	if res.TimedOut {
		rep.Problems = append(rep.Problems, fmt.Sprintf("verifier timed out after %s", cmd.Timeout))
	}
	return rep, res.TimedOut, offline, nil
}

func needsOffline(t *harbor.Task) bool {
	need, _ := verifier.NeedsOffline(t)
	return need
}
