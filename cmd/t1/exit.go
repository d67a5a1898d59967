package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/t1pipe/t1/engine"
)

// Exit codes of every t1 command, for cron, Slurm and Kubernetes: a job
// that ends 0 is done; any other code says whether rerunning as it is can
// help (3, 4, 5), or something must change first (1, 2). README's table
// spells them out.
const (
	exitOK = 0 // done, or nothing to do
	// exitFailed: the work ran and failed (run.failed, an evaluation whose
	// attempts all failed, a stage that gave up).
	exitFailed = 1
	// exitConfig: the command line or the configuration is wrong (bad flag,
	// invalid pipeline.yaml, unknown run, policy version or suite).
	exitConfig = 2
	// exitInfra: NATS or S3 could not be reached, or was lost while working.
	exitInfra = 3
	// exitBusy: another process holds the lease of a stage that must run
	// once (control, eval); retry later.
	exitBusy = 4
	// exitStopped: interrupted (SIGINT, SIGTERM) before the work was done;
	// rerunning resumes it.
	exitStopped = 5
)

// codedError carries the exit code its cause calls for.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// withCode marks err (when not nil) with an exit code, keeping a code
// already given deeper down.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*codedError](err); ok {
		return err
	}
	return &codedError{code: code, err: err}
}

func configError(format string, args ...any) error {
	return &codedError{code: exitConfig, err: fmt.Errorf(format, args...)}
}

func infraError(err error) error { return withCode(exitInfra, err) }

// errStopped ends a job that was interrupted before its work was done.
var errStopped = &codedError{code: exitStopped, err: errors.New("stopped before the work was done; run the same command again to resume")}

// exitCode is the code the process ends with after err.
func exitCode(ctx context.Context, err error) int {
	if err == nil {
		return exitOK
	}
	if ce, ok := errors.AsType[*codedError](err); ok {
		return ce.code
	}
	switch {
	case errors.Is(err, engine.ErrLeased):
		return exitBusy
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return exitStopped
	case usageError(err):
		return exitConfig
	}
	return exitFailed
}

// usageError recognises the errors cobra makes of a bad command line,
// which carry no type of their own (flag errors are marked by the root's
// flag error function).
func usageError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "received ", "invalid argument"} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, " "+p) {
			return true
		}
	}
	return false
}
