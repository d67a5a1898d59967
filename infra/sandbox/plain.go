package sandbox

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
)

// Plain runs commands as ordinary host processes in a per-attempt
// directory. It isolates nothing: commands see and can change the whole
// host as the calling user. It exists for machines without bubblewrap, and
// says so: every Start logs a warning, and Info().Isolated is false.
//
// The sandbox directories (/app, /tmp, …) do not exist on the host: each
// maps to a directory under the attempt root (Info().Paths), and the API
// (Cmd.Dir, Upload, Download, Snapshot, Dockerfile WORKDIR and COPY)
// translates sandbox paths, but paths written inside commands are not
// translated. HOME and TMPDIR point at the mapped /root and /tmp.
type Plain struct {
	// Why is added to the reason Info gives (e.g. why bwrap was not used).
	Why string
}

// Name implements Backend.
func (p *Plain) Name() string { return "process" }

// Isolates implements Backend: commands run on the host.
func (p *Plain) Isolates() bool { return false }

// Start implements Backend.
func (p *Plain) Start(ctx context.Context, spec Spec) (Sandbox, error) {
	if spec.Image != nil {
		return nil, errNoImage
	}
	if spec.Proxy != nil {
		return nil, errNoNetwork
	}
	l := &plainLauncher{why: p.Why}
	_, reason := l.isolated()
	slog.Warn("sandbox: plain process backend: commands run unisolated on the host", "reason", reason)
	return start(ctx, l, spec, -1, -1, nil)
}

type plainLauncher struct{ why string }

func (l *plainLauncher) name() string { return "process" }

func (l *plainLauncher) isolated() (bool, string) {
	r := "plain process backend: commands run on the host as the calling user, with rlimits but no namespaces; they can read and change anything that user can"
	if l.why != "" {
		r += " (" + l.why + ")"
	}
	return false, r
}

// enforcesNproc: the kernel exempts root from RLIMIT_NPROC.
func (l *plainLauncher) enforcesNproc() bool { return os.Geteuid() != 0 }

func (l *plainLauncher) visible(b *box, p string) string {
	if h, err := b.hostPath(p); err == nil {
		return h
	}
	return p
}

func (l *plainLauncher) command(b *box, argv, env []string, dir, user string, standIns map[string]string) (*exec.Cmd, error) {
	if user != "" && user != "root" {
		return nil, errNoUser
	}
	if len(standIns) > 0 {
		return nil, errNoStandIns
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = l.visible(b, dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}
