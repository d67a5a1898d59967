package sandbox

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/t1pipe/t1/infra/egress"
)

// Backend starts sandboxes. Implementations: Bubblewrap (isolated) and
// Plain (no isolation); ByName picks one, never Plain unless asked to.
type Backend interface {
	// Name is "bwrap" or "process".
	Name() string
	// Isolates reports whether the backend's sandboxes isolate commands
	// from the host. It is known before Start, which already runs the
	// task's environment build: a caller that refuses unisolated execution
	// must ask here, not after Start.
	Isolates() bool
	// Start prepares a fresh sandbox for spec: per-attempt directories,
	// the task's environment (Dockerfile subset or setup.sh, run inside the
	// sandbox), and the snapshot baseline taken after that. The returned
	// sandbox must be closed.
	Start(ctx context.Context, spec Spec) (Sandbox, error)
}

// Spec says what sandbox to build.
type Spec struct {
	// TaskDir is a Harbor task directory; its environment/ builds the
	// initial state. Empty means an empty sandbox.
	TaskDir string
	// Limits bounds every process the sandbox runs; zero fields take the
	// values of DefaultLimits.
	Limits Limits
	// Env is added to every command's environment, after the task's
	// Dockerfile ENV and before Cmd.Env.
	Env map[string]string
	// WorkDir is the default directory of commands, a sandbox path; empty
	// means the Dockerfile's last WORKDIR, else /app.
	WorkDir string
	// TempDir is where the per-attempt host directories are created; empty
	// means os.TempDir().
	TempDir string
	// Image, when set, is the sandbox's root filesystem instead of the
	// host's system directories. TaskDir, if also set, is built on top of
	// it as usual (an image built from the task's Dockerfile comes with
	// TaskDir empty). Only bwrap run as root supports it.
	Image *Image
	// Verifier says the sandbox runs the task's verifier offline, with
	// stand-ins for the installers test.sh calls: a backend that builds
	// images (package image) adds what those installers would fetch at
	// verify time (Debian's python3, pytest, the packages test.sh's
	// apt-get install names) as a layer of the verifier's image alone.
	// Other backends ignore it.
	Verifier bool
	// Proxy, when set, is the sandbox's one way out (network policy
	// registries): every command reaches it at 127.0.0.1:3128 with the
	// proxy variables set (egress.Env), and nothing else. Nil is no
	// network at all. The sandbox owns it: Close closes it, after which
	// its Requests are the attempt's whole log. Only bwrap run as root
	// supports it.
	Proxy *egress.Proxy
}

// Sandbox is one attempt's isolated shell environment. Paths given to its
// methods are sandbox paths (/app/x, /tmp, /logs/verifier); relative ones
// are taken from the default work directory. Methods may be called from
// several goroutines.
type Sandbox interface {
	// Info says which backend runs the sandbox and whether it isolates.
	Info() Info
	// Exec runs one command to completion in a fresh process tree: any
	// process it leaves behind is killed when it returns. Shell state does
	// not carry between Exec calls; use Shell for that. The error is for
	// failures to run at all; a command that runs and fails is a Result
	// with a non-zero ExitCode.
	Exec(ctx context.Context, cmd Cmd) (Result, error)
	// Shell starts a persistent bash session (see Shell).
	Shell(ctx context.Context, opts ShellOptions) (Shell, error)
	// Upload copies the host file or directory src to the sandbox path
	// dst, replacing what is there, e.g. Upload(ctx, task+"/tests", "/tests")
	// before the verifier runs.
	Upload(ctx context.Context, src, dst string) error
	// Download copies the sandbox file or directory src to the host path
	// dst. Symbolic links are copied as links, never followed.
	Download(ctx context.Context, src, dst string) error
	// Snapshot writes to w a tar layer of everything changed since the
	// baseline (see the package documentation for the format).
	Snapshot(ctx context.Context, w io.Writer) error
	// Restore applies a layer written by Snapshot; applied to a fresh
	// sandbox of the same task it reproduces the snapshotted state.
	Restore(ctx context.Context, r io.Reader) error
	// Close kills every process the sandbox started and removes its
	// directories. It is safe to call more than once.
	Close() error
}

// Info describes a running sandbox.
type Info struct {
	// Backend is "bwrap" or "process".
	Backend string
	// Isolated is false when commands run directly on the host.
	Isolated bool
	// Reason explains Isolated in one sentence; rollouts copy it into every
	// trajectory's metadata.
	Reason string
	// ID is the sandbox's unique id; every process it starts carries
	// T1_SANDBOX=<ID> in its environment.
	ID string
	// Root is the per-attempt host directory.
	Root string
	// Paths maps each writable sandbox directory (/app, /tmp, …) to the host
	// directory that holds it. Under bwrap commands see the sandbox paths;
	// under the plain backend they see the host paths.
	Paths map[string]string
	// Limits are the limits in force.
	Limits Limits
	// Disk says how Limits.Disk and Limits.Inodes are enforced: DiskTmpfs
	// (a root caller mounts a tmpfs of that size per attempt and the
	// kernel refuses writes past it) or DiskMeasured (the directories are
	// measured while commands run; see the package documentation).
	Disk string
	// ImageLayers is how many image layers the root filesystem is made
	// of (Spec.Image); 0 means the host's system directories.
	ImageLayers int
	// Notes say what building the task's environment left out (a
	// Dockerfile's FROM image), one sentence each with file and line.
	Notes []string
	// Aliases are commands the sandbox provides for its FROM image
	// (python → /usr/bin/python3 for python:* images), first on PATH.
	Aliases map[string]string
	// Proxy is Spec.Proxy: nil when the sandbox has no network.
	Proxy *egress.Proxy `json:"-"`
}

// CommandPath maps a sandbox path to the path commands see: itself under
// an isolating backend, the host directory under the plain one. Paths
// outside the writable directories are returned unchanged.
func (i Info) CommandPath(p string) string {
	if i.Isolated {
		return p
	}
	best := ""
	for d := range i.Paths {
		if (p == d || strings.HasPrefix(p, d+"/")) && len(d) > len(best) {
			best = d
		}
	}
	if best == "" {
		return p
	}
	return i.Paths[best] + strings.TrimPrefix(p, best)
}

// Cmd is one command. Exactly one of Args and Script is set.
type Cmd struct {
	// Args is the program and its arguments, looked up in PATH.
	Args []string
	// Script is run by bash -c.
	Script string
	// Env is added to the sandbox environment ("K=V" entries).
	Env []string
	// Dir is the working directory, a sandbox path; empty means the
	// sandbox's default.
	Dir string
	// User is "" or "root" for the sandbox's default user, or a numeric uid
	// (bwrap only; below IDBlock when the sandbox has a block of ids, and
	// then with group 0 and no capabilities, as docker run --user 1000).
	User string
	// Timeout bounds the command; zero or more than Limits.WallClock means
	// Limits.WallClock.
	Timeout time.Duration
	// Stdin feeds the command; nil means no input (/dev/null).
	Stdin io.Reader
	// MaxOutput bounds each of Stdout and Stderr in Result; zero means
	// DefaultMaxOutput. Past it the head and the tail are kept.
	MaxOutput int
	// StreamStdout and StreamStderr, when set, also receive the whole
	// output as it is produced (for interactive use).
	StreamStdout, StreamStderr io.Writer
	// StandIns replace programs for this command only (bwrap): each key
	// is the absolute path of a program in the sandbox, links followed
	// within its root; each value the sandbox path, in a writable
	// directory, of the file that runs in its place, whatever path names
	// the program (a full path, a link, a venv's python). The program
	// itself stays at OriginalsDir followed by its resolved path.
	StandIns map[string]string
}

// OriginalsDir holds, for a command with StandIns, the programs they
// replace: /usr/bin/python3.11 at OriginalsDir+"/usr/bin/python3.11".
const OriginalsDir = "/run/t1-originals"

// DefaultMaxOutput is the default bound on each captured stream.
const DefaultMaxOutput = 64 << 10

// Result is the outcome of a command. Stdout and Stderr hold the bytes
// the command wrote, which need not be valid UTF-8; when Truncated, the
// middle of a stream was replaced by a line "[… N bytes omitted …]".
type Result struct {
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// ExitCode is the exit status, 128+n for a command killed by signal n,
	// and -1 when the sandbox killed it (timeout, disk limit).
	ExitCode int  `json:"exit_code"`
	TimedOut bool `json:"timed_out"`
	// Truncated says that Stdout or Stderr lost its middle.
	Truncated bool `json:"truncated"`
	// DiskExceeded says the writable directories outgrew Limits.Disk while
	// the command ran; the command was stopped and the notice appended to
	// Stderr.
	DiskExceeded bool `json:"disk_exceeded"`
	// Restarted says a Shell had to be restarted: its state (directory,
	// variables, jobs) is lost; files remain. The notice is in Stderr.
	Restarted bool          `json:"restarted"`
	Duration  time.Duration `json:"duration_ns"`
}

// Shell is a persistent bash session: the working directory, variables,
// functions and background jobs carry from one Run to the next.
type Shell interface {
	// Run executes script in the session. On timeout the foreground job is
	// interrupted (SIGINT) and, if the session does not recover within two
	// seconds, the session is restarted (Result.Restarted). A script that
	// exits the shell also restarts it.
	Run(ctx context.Context, script string, opts RunOptions) (Result, error)
	// Close ends the session and every process it started.
	Close() error
}

// ShellOptions configure a Shell.
type ShellOptions struct {
	// Env is added to the session's environment.
	Env []string
	// Dir is the initial directory; empty means the sandbox default.
	Dir string
}

// RunOptions bound one Shell.Run.
type RunOptions struct {
	Timeout   time.Duration // as Cmd.Timeout
	MaxOutput int           // as Cmd.MaxOutput
	Stdin     io.Reader     // as Cmd.Stdin
}

// ErrClosed is returned by methods of a closed sandbox or shell.
var ErrClosed = errors.New("sandbox: closed")
