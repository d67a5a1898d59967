// Package exit holds the exit codes of every t1 command, for cron, Slurm
// and Kubernetes: a job that ends 0 is done; any other code says whether
// rerunning as it is can help (3, 4, 5), or something must change first
// (1, 2). README's table spells them out. The work a command runs marks
// its errors with the code their cause calls for, wherever it fails, so
// that the command needs to know none of them.
package exit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/t1pipe/t1/engine"
)

const (
	OK = 0 // done, or nothing to do
	// Failed: the work ran and failed (run.failed, an evaluation whose
	// attempts all failed, a stage that gave up).
	Failed = 1
	// Config: the command line or the configuration is wrong (bad flag,
	// invalid pipeline.yaml, unknown run, policy version or suite).
	Config = 2
	// Infra: NATS or S3 could not be reached, or was lost while working.
	Infra = 3
	// Busy: another process holds the lease of a stage that must run once
	// (control, eval); retry later.
	Busy = 4
	// Stopped: interrupted (SIGINT, SIGTERM) before the work was done;
	// rerunning resumes it.
	Stopped = 5
)

// codedError carries the exit code its cause calls for.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// With marks err (when not nil) with an exit code, keeping a code already
// given deeper down.
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*codedError](err); ok {
		return err
	}
	return &codedError{code: code, err: err}
}

// Configf is a configuration error (exit 2).
func Configf(format string, args ...any) error {
	return &codedError{code: Config, err: fmt.Errorf(format, args...)}
}

// InfraError marks err as the infrastructure's (exit 3), but for a lease
// another process holds, which is no outage: that stays Busy.
func InfraError(err error) error {
	if errors.Is(err, engine.ErrLeased) {
		return err
	}
	return With(Infra, err)
}

// ErrStopped ends a job that was interrupted before its work was done.
var ErrStopped error = &codedError{code: Stopped, err: errors.New("stopped before the work was done; run the same command again to resume")}

// Code is the code the process ends with after err.
func Code(ctx context.Context, err error) int {
	if err == nil {
		return OK
	}
	if ce, ok := errors.AsType[*codedError](err); ok {
		return ce.code
	}
	switch {
	case errors.Is(err, engine.ErrLeased):
		return Busy
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return Stopped
	case usageError(err):
		return Config
	}
	return Failed
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

// Line keeps an error to a single readable line, as a command prints it
// and as summaries record it.
func Line(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
