package sandbox

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Help texts of `t1 sandbox` and its run command.
const (
	Help = "Each invocation builds a fresh sandbox from a Harbor task directory (environment/Dockerfile\n" +
		"subset or environment/setup.sh), runs in it, and removes it with every process it started.\n" +
		"The backend and limits come from the configuration's sandbox section; --backend overrides."
	RunHelp = "Runs CMD in a fresh sandbox, streaming its output, and exits with its exit code (124 when it\n" +
		"timed out, 125 when the sandbox could not run it). With --json, prints the result instead."
)

// Outcome is one command's result in a sandbox of its own.
type Outcome struct {
	Backend  string `json:"backend"`
	Isolated bool   `json:"isolated"`
	Result
	timeout time.Duration
	disk    int64
}

// RunOnce runs c in sb, then removes sb with every process it started.
func RunOnce(ctx context.Context, sb Sandbox, c Cmd) (Outcome, error) {
	res, err := sb.Exec(ctx, c)
	info := sb.Info()
	sb.Close()
	return Outcome{Backend: info.Backend, Isolated: info.Isolated, Result: res, timeout: c.Timeout, disk: info.Limits.Disk}, err
}

// Code is the exit code a process running the command exits with, as
// timeout(1) and env(1) do: 124 when it timed out, 125 when it never
// ran to an exit status of its own.
func (o Outcome) Code() int {
	switch {
	case o.TimedOut:
		return 124
	case o.ExitCode < 0 || o.ExitCode > 255:
		return 125
	}
	return o.ExitCode
}

// WriteNotes says what the command's own output cannot: that the sandbox
// stopped it.
func (o Outcome) WriteNotes(w io.Writer) {
	if o.TimedOut {
		fmt.Fprintf(w, "t1 sandbox: timed out after %s\n", o.timeout)
	}
	if o.DiskExceeded {
		fmt.Fprintf(w, "t1 sandbox: disk limit exceeded (%s)\n", FormatSize(o.disk))
	}
}

// Interactive runs an interactive bash in sb on the terminal's streams
// until it exits or the timeout ends it.
func Interactive(ctx context.Context, sb Sandbox, timeout time.Duration, stdin io.Reader, stdout, stderr io.Writer) error {
	info := sb.Info()
	fmt.Fprintf(stderr, "t1 sandbox: %s backend (isolated: %v), %s; exit or Ctrl-D to leave\n", info.Backend, info.Isolated, info.Root)
	res, err := sb.Exec(ctx, Cmd{
		Args:         []string{"bash", "--norc", "--noprofile", "-i"},
		Timeout:      timeout,
		Stdin:        stdin,
		StreamStdout: stdout,
		StreamStderr: stderr,
		MaxOutput:    1024,
	})
	if err != nil {
		return err
	}
	if res.TimedOut {
		fmt.Fprintf(stderr, "t1 sandbox: session ended after %s (--timeout)\n", timeout)
	}
	return nil
}
