package config

import (
	"context"
	"fmt"
	"time"

	"github.com/t1pipe/t1/image"
	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/trial"
)

// Values of Sandbox.Image.
const (
	// ImageHost runs sandboxes on the host's /usr, /etc and /var,
	// read-only: what the host has installed, the task's Dockerfile RUN
	// lines offline on top (SECURITY.md: the weaker mode).
	ImageHost = "host"
	// ImageDockerfile runs each sandbox on an image built from its
	// task's Dockerfile (package image), its RUN steps reaching the
	// registries (Registries) through t1's proxy.
	ImageDockerfile = "dockerfile"
)

// Sandbox configures the per-attempt sandboxes agents work in.
type Sandbox struct {
	// Backend is auto or bwrap (bubblewrap, which must work on this
	// machine: nothing falls back to less isolation), or process (commands
	// on the host, isolating nothing), which needs AllowUnisolated.
	Backend string `yaml:"backend"`
	// AllowUnisolated permits sandboxes that isolate nothing. Off, a stage
	// handed such a sandbox refuses it.
	AllowUnisolated bool `yaml:"allow_unisolated"`
	// Image is the sandboxes' root filesystem: ImageHost or
	// ImageDockerfile.
	Image string `yaml:"image"`
	// ImageCache is where image layers are kept; empty means the user's
	// cache directory (image.DefaultCacheDir).
	ImageCache string `yaml:"image_cache"`
	// Network is the sandboxes' network policy: egress.None (loopback
	// only) or egress.Registries (the hosts of Registries through t1's
	// proxy, every request logged in the attempt's record). A task whose
	// task.toml says [environment] allow_internet = false gets none
	// either way.
	Network string `yaml:"network"`
	// Registries is the proxy's allow-list (host or host:port); empty
	// means the host's Debian mirrors (as its apt is configured), PyPI
	// and npm (image.DefaultRegistries). Image builds go through the same
	// proxy, whatever Network says.
	Registries []string `yaml:"registries"`
	// NetworkRewards lets attempts whose rewards train the policy have
	// the registries policy. Off, a run that trains refuses Network
	// registries; evaluation alone (t1 eval, t1 tasks check) takes it.
	NetworkRewards bool          `yaml:"network_rewards"`
	Limits         SandboxLimits `yaml:"limits"`
}

// SandboxLimits are the default limits of every sandbox. Sizes are byte
// counts with an optional binary unit: 512MiB, 4GiB.
type SandboxLimits struct {
	CPUSeconds int           `yaml:"cpu_seconds"` // CPU time of each process
	Memory     string        `yaml:"memory"`      // address space of each process; bwrap: the whole sandbox too
	Processes  int           `yaml:"processes"`   // processes and threads at once
	CPUs       float64       `yaml:"cpus"`        // CPU bandwidth of the whole sandbox, in cores
	Cgroup     string        `yaml:"cgroup"`      // required | optional: a host without a cgroup for the sandbox
	FileSize   string        `yaml:"file_size"`   // largest file a process may write
	OpenFiles  int           `yaml:"open_files"`  // open files of each process
	Disk       string        `yaml:"disk"`        // all writable directories together
	WallClock  time.Duration `yaml:"wall_clock"`  // each command
}

func defaultSandbox() Sandbox {
	d := sandbox.DefaultLimits()
	return Sandbox{
		Backend:    "auto",
		Image:      ImageHost,
		Network:    egress.None,
		Registries: []string{},
		Limits: SandboxLimits{
			CPUSeconds: d.CPUSeconds,
			Memory:     sandbox.FormatSize(d.Memory),
			Processes:  d.Processes,
			CPUs:       d.CPUs,
			Cgroup:     d.Cgroup,
			FileSize:   sandbox.FormatSize(d.FileSize),
			OpenFiles:  d.OpenFiles,
			Disk:       sandbox.FormatSize(d.Disk),
			WallClock:  d.WallClock,
		},
	}
}

// SandboxLimits converts the configured limits for infra/sandbox. The
// configuration must be valid (Parse and Validate check it).
func (s Sandbox) SandboxLimits() sandbox.Limits {
	size := func(v string) int64 {
		n, _ := sandbox.ParseSize(v)
		return n
	}
	l := s.Limits
	return sandbox.Limits{
		CPUSeconds: l.CPUSeconds,
		Memory:     size(l.Memory),
		Processes:  l.Processes,
		CPUs:       l.CPUs,
		Cgroup:     l.Cgroup,
		FileSize:   size(l.FileSize),
		OpenFiles:  l.OpenFiles,
		Disk:       size(l.Disk),
		WallClock:  l.WallClock,
	}
}

// NewBackend returns the backend called name (empty: s.Backend), on the
// root filesystem s.Image says.
func (s Sandbox) NewBackend(name string) (sandbox.Backend, error) {
	if name == "" {
		name = s.Backend
	}
	be, err := sandbox.ByName(name, s.AllowUnisolated)
	if err != nil {
		return nil, err
	}
	switch s.Image {
	case "", ImageHost:
		return be, nil
	case ImageDockerfile:
		if !be.Isolates() {
			return nil, fmt.Errorf("sandbox.image: %s needs the bwrap backend, not %s", ImageDockerfile, be.Name())
		}
		hosts, err := s.AllowList()
		if err != nil {
			return nil, err
		}
		return &image.Backend{Inner: be, Options: image.Options{CacheDir: s.ImageCache, Registries: hosts}}, nil
	}
	return nil, fmt.Errorf("sandbox.image: unknown %q (want %s or %s)", s.Image, ImageHost, ImageDockerfile)
}

// AllowList is the proxy's allow-list: Registries, or
// image.DefaultRegistries.
func (s Sandbox) AllowList() ([]string, error) {
	if len(s.Registries) > 0 {
		return s.Registries, nil
	}
	return image.DefaultRegistries("")
}

// CheckTraining refuses a network policy other than none for a run whose
// rewards train the policy, unless NetworkRewards allows it: a reward
// that depends on what a registry serves that day is not reproducible,
// and a policy rewarded through the network learns to use it.
func (s Sandbox) CheckTraining() error {
	if s.Network == egress.None || s.Network == "" || s.NetworkRewards {
		return nil
	}
	return fmt.Errorf("sandbox.network: %s would give the attempts whose rewards train the policy the package registries; set sandbox.network_rewards: true to allow that, or keep network %s for training and use %s for evaluation (t1 eval, t1 tasks check)", s.Network, egress.None, s.Network)
}

func (s Sandbox) check(bad func(path, format string, args ...any)) {
	switch s.Network {
	case egress.None, egress.Registries:
	default:
		bad("sandbox.network", "want %s (loopback only) or %s (the package registries through t1's proxy), got %q", egress.None, egress.Registries, s.Network)
	}
	if s.Network == egress.Registries && s.Backend == "process" {
		bad("sandbox.network", "%s confines a sandbox to t1's proxy under bubblewrap; the process backend shares the host's network: use backend bwrap", egress.Registries)
	}
	if _, err := egress.New(s.Registries); err != nil {
		bad("sandbox.registries", "%v", err)
	}
	switch s.Image {
	case ImageHost:
	case ImageDockerfile:
		if s.Backend == "process" {
			bad("sandbox.image", "%s runs on an image under bubblewrap; the process backend runs on the host: use backend bwrap", ImageDockerfile)
		}
	default:
		bad("sandbox.image", "want %s (the host's system directories, read-only) or %s (an image built from each task's Dockerfile), got %q", ImageHost, ImageDockerfile, s.Image)
	}
	switch s.Backend {
	case "auto", "bwrap":
	case "process":
		if !s.AllowUnisolated {
			bad("sandbox.backend", "process runs every command on the host with no isolation; set sandbox.allow_unisolated: true to choose that, or use bwrap")
		}
	default:
		bad("sandbox.backend", "unknown backend %q (want auto, bwrap or process)", s.Backend)
	}
	l := s.Limits
	for _, f := range []struct {
		key string
		v   int
	}{{"cpu_seconds", l.CPUSeconds}, {"processes", l.Processes}, {"open_files", l.OpenFiles}} {
		if f.v < 1 {
			bad("sandbox.limits."+f.key, "must be at least 1, got %d", f.v)
		}
	}
	for _, f := range []struct{ key, v string }{{"memory", l.Memory}, {"file_size", l.FileSize}, {"disk", l.Disk}} {
		n, err := sandbox.ParseSize(f.v)
		switch {
		case err != nil:
			bad("sandbox.limits."+f.key, "want a size such as 512MiB or 4GiB, got %q", f.v)
		case n < 1<<20:
			bad("sandbox.limits."+f.key, "must be at least 1MiB, got %s", f.v)
		}
	}
	if l.CPUs < 0.01 {
		bad("sandbox.limits.cpus", "must be at least 0.01 (cores), got %g", l.CPUs)
	}
	switch l.Cgroup {
	case sandbox.CgroupRequired, sandbox.CgroupOptional:
	default:
		bad("sandbox.limits.cgroup", "want %s (a host without a cgroup for the sandbox fails) or %s (such a host runs sandboxes under per-process rlimits alone), got %q", sandbox.CgroupRequired, sandbox.CgroupOptional, l.Cgroup)
	}
	if l.WallClock <= 0 {
		bad("sandbox.limits.wall_clock", "must be positive, got %s", l.WallClock)
	}
}

// Start builds a sandbox of the task directory (empty: an empty sandbox)
// on the named backend (empty: the configured one). A timeout above zero
// replaces the configured wall clock; the wall clock in force is returned.
func (s Sandbox) Start(ctx context.Context, backend, task string, timeout time.Duration) (sandbox.Sandbox, time.Duration, error) {
	be, err := s.NewBackend(backend)
	if err != nil {
		return nil, 0, err
	}
	limits := s.SandboxLimits()
	if timeout > 0 {
		limits.WallClock = timeout
	}
	spec := sandbox.Spec{TaskDir: task, Limits: limits}
	if s.Network == egress.Registries {
		hosts, err := s.AllowList()
		if err != nil {
			return nil, 0, err
		}
		if spec.Proxy, err = egress.New(hosts); err != nil {
			return nil, 0, err
		}
	}
	sb, err := be.Start(ctx, spec)
	if err != nil {
		return nil, 0, err
	}
	return sb, limits.WallClock, nil
}

// TrialOptions are the options of an attempt in a sandbox of the named
// backend (empty: the configured one), within the configured limits.
func (s Sandbox) TrialOptions(backend string) (trial.Options, error) {
	be, err := s.NewBackend(backend)
	if err != nil {
		return trial.Options{}, err
	}
	opt := trial.Options{Backend: be, Limits: s.SandboxLimits(), AllowUnisolated: s.AllowUnisolated}
	if s.Network == egress.Registries {
		if opt.Registries, err = s.AllowList(); err != nil {
			return trial.Options{}, err
		}
	}
	return opt, nil
}
