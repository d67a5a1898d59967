package config

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/sandbox"
)

func TestSandboxDefaultsMatchPackage(t *testing.T) {
	if got, want := Default().Sandbox.SandboxLimits(), sandbox.DefaultLimits(); got != want {
		t.Errorf("config defaults %+v, package defaults %+v", got, want)
	}
}

func TestSandboxImageDefault(t *testing.T) {
	if got := Default().Sandbox.Image; got != ImageHost {
		t.Errorf("sandbox.image defaults to %q: existing runs must keep the host's system directories", got)
	}
}

func TestSandboxOverlay(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte("sandbox:\n  backend: bwrap\n  limits:\n    memory: 512MiB\n    disk: 3G\n    wall_clock: 90s\n    processes: 64\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Sandbox.SandboxLimits()
	if cfg.Sandbox.Backend != "bwrap" || l.Memory != 512<<20 || l.Disk != 3<<30 || l.WallClock != 90*time.Second || l.Processes != 64 || l.CPUSeconds != 600 {
		t.Errorf("parsed %+v -> %+v", cfg.Sandbox, l)
	}
}

func TestSandboxErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"sandbox:\n  backend: docker\n", `p.yaml:2:12: sandbox.backend: unknown backend "docker" (want auto, bwrap or process)`},
		{"sandbox:\n  limits:\n    memory: lots\n", `p.yaml:3:13: sandbox.limits.memory: want a size such as 512MiB or 4GiB, got "lots"`},
		{"sandbox:\n  limits:\n    disk: 10KiB\n", `p.yaml:3:11: sandbox.limits.disk: must be at least 1MiB, got 10KiB`},
		{"sandbox:\n  limits:\n    processes: 0\n", `p.yaml:3:16: sandbox.limits.processes: must be at least 1, got 0`},
		{"sandbox:\n  limits:\n    wall_clock: 0s\n", `p.yaml:3:17: sandbox.limits.wall_clock: must be positive, got 0s`},
		{"sandbox:\n  image: docker\n", `p.yaml:2:10: sandbox.image: want host (the host's system directories, read-only) or dockerfile (an image built from each task's Dockerfile), got "docker"`},
		{"sandbox:\n  backend: process\n  allow_unisolated: true\n  image: dockerfile\n", `sandbox.image: dockerfile runs on an image under bubblewrap; the process backend runs on the host: use backend bwrap`},
		{"sandbox:\n  network: internet\n", `p.yaml:2:12: sandbox.network: want none (loopback only) or registries (the package registries through t1's proxy), got "internet"`},
		{"sandbox:\n  backend: process\n  allow_unisolated: true\n  network: registries\n", `p.yaml:4:12: sandbox.network: registries confines a sandbox to t1's proxy under bubblewrap`},
		{"sandbox:\n  registries: [pypi.org, 'https://files.pythonhosted.org']\n", `sandbox.registries: egress: allow-list entry "https://files.pythonhosted.org": want a host name or address`},
		{"sandbox:\n  limits:\n    memroy: 1GiB\n", `p.yaml:3:5: unknown key "memroy" in sandbox.limits (did you mean "memory"?)`},
	} {
		_, err := Parse("p.yaml", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got  %v\n want %s", tc.src, err, tc.want)
		}
	}
}

// An attempt's options and a started sandbox take the configured backend
// and limits; a timeout replaces the wall clock.
func TestSandboxTrialOptionsAndStart(t *testing.T) {
	s := Default().Sandbox
	s.AllowUnisolated = true
	o, err := s.TrialOptions("process")
	if err != nil || o.Backend.Name() != "process" || o.Limits != s.SandboxLimits() || !o.AllowUnisolated {
		t.Fatalf("%v %+v", err, o)
	}
	if _, err := s.TrialOptions("nonesuch"); err == nil {
		t.Fatal("unknown backend accepted")
	}
	sb, wall, err := s.Start(context.Background(), "process", "", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if wall != 3*time.Second || sb.Info().Limits.WallClock != wall {
		t.Fatalf("wall clock %s, sandbox's %s", wall, sb.Info().Limits.WallClock)
	}
}

func TestSandboxNetworkDefaultsToNone(t *testing.T) {
	s := Default().Sandbox
	if s.Network != "none" || s.NetworkRewards {
		t.Fatalf("network %q, network_rewards %v: runs must have no network unless configured", s.Network, s.NetworkRewards)
	}
	o, err := s.TrialOptions("")
	if err == nil && o.Registries != nil {
		t.Fatalf("network none gives attempts the registries %v", o.Registries)
	}
}

// A run that trains refuses network registries unless network_rewards
// says so; evaluation alone takes it.
func TestSandboxNetworkForTrainingRewards(t *testing.T) {
	cfg, err := Parse("p.yaml", []byte("sandbox:\n  network: registries\n  registries: [pypi.org, 'mirror.example:8080']\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Sandbox.CheckTraining()
	if err == nil || !strings.Contains(err.Error(), "sandbox.network: registries") || !strings.Contains(err.Error(), "sandbox.network_rewards: true") {
		t.Fatalf("training with network registries: %v", err)
	}
	if hosts, err := cfg.Sandbox.AllowList(); err != nil || strings.Join(hosts, ",") != "pypi.org,mirror.example:8080" {
		t.Fatalf("allow-list %v %v", hosts, err)
	}
	cfg.Sandbox.NetworkRewards = true
	if err := cfg.Sandbox.CheckTraining(); err != nil {
		t.Fatal(err)
	}
	if err := Default().Sandbox.CheckTraining(); err != nil {
		t.Fatal(err)
	}
}
