package sandbox

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limits bound a sandbox. Zero fields take DefaultLimits' values.
type Limits struct {
	// CPUSeconds is RLIMIT_CPU of every process (seconds of CPU time).
	CPUSeconds int
	// Memory is RLIMIT_AS of every process, in bytes (address space, which
	// over-counts resident memory), and under bwrap also the memory of the
	// whole sandbox together (its cgroup's limit, swap included: page
	// cache, tmpfs and shared memory count).
	Memory int64
	// Processes is RLIMIT_NPROC: processes and threads at once. It is
	// counted per host uid, which is why the bwrap backend runs each
	// sandbox under its own host uid; under bwrap the sandbox's cgroup
	// bounds its tasks to the same number.
	Processes int
	// CPUs is the CPU bandwidth of the whole sandbox under bwrap, in
	// cores (its cgroup's quota).
	CPUs float64
	// Cgroup says what the bwrap backend does on a host that gives it no
	// cgroup for the totals above: CgroupRequired (Start fails) or
	// CgroupOptional (the sandbox runs under the per-process rlimits
	// alone, and Info().Reason says so).
	Cgroup string
	// FileSize is RLIMIT_FSIZE, the largest file a process may write.
	FileSize int64
	// OpenFiles is RLIMIT_NOFILE.
	OpenFiles int
	// Disk is the byte budget of all writable directories together
	// (allocated blocks, so sparse holes are free).
	Disk int64
	// Inodes bounds the names (files, directories, links, each hard link)
	// of the writable directories together, the directories themselves included; zero
	// means one per 16 KiB of Disk (mkfs.ext4's ratio), at least 4096.
	Inodes int64
	// WallClock bounds each command (Exec, Shell.Run, setup steps).
	WallClock time.Duration
}

// The values of Limits.Cgroup.
const (
	CgroupRequired = "required"
	CgroupOptional = "optional"
)

// DefaultLimits suit one agent attempt on a shared machine.
func DefaultLimits() Limits {
	return Limits{
		CPUSeconds: 600,
		Memory:     4 << 30,
		Processes:  256,
		CPUs:       2,
		Cgroup:     CgroupRequired,
		FileSize:   1 << 30,
		OpenFiles:  1024,
		Disk:       2 << 30,
		WallClock:  10 * time.Minute,
	}
}

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.CPUSeconds <= 0 {
		l.CPUSeconds = d.CPUSeconds
	}
	if l.Memory <= 0 {
		l.Memory = d.Memory
	}
	if l.Processes <= 0 {
		l.Processes = d.Processes
	}
	if l.CPUs <= 0 {
		l.CPUs = d.CPUs
	}
	if l.Cgroup == "" {
		l.Cgroup = d.Cgroup
	}
	if l.FileSize <= 0 {
		l.FileSize = d.FileSize
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.Disk <= 0 {
		l.Disk = d.Disk
	}
	if l.Inodes <= 0 {
		l.Inodes = max(l.Disk>>14, 4096)
	}
	if l.WallClock <= 0 {
		l.WallClock = d.WallClock
	}
	return l
}

// layerEntry bounds the header bytes of one layer entry: PAX records
// with a path of up to PATH_MAX twice over (name and sparse name), the
// header blocks and the padding of its data.
const layerEntry = 10 << 10

// MaxLayer is the largest snapshot layer a sandbox under l writes: its
// files' data, at most Disk twice over (a sparse file with more segments
// than its map carries stores some holes as zeros), plus the headers of
// an entry for each inode now and each one deleted since the baseline.
// Readers of layers bound what they read by it.
func (l Limits) MaxLayer() int64 {
	l = l.withDefaults()
	return 2*l.Disk + 2*l.Inodes*layerEntry + 1<<20
}

// MaxLogical bounds what a layer's regular files add up to with their
// holes filled in: restoring reads through the holes, so an unbounded
// sparse file would take unbounded time.
func (l Limits) MaxLogical() int64 {
	l = l.withDefaults()
	return 16 * l.Disk
}

// ulimitScript is the bash prologue that applies the limits, soft and hard,
// before exec'ing the command. The limits are set inside the sandbox after
// bwrap has built it, so bwrap itself is not bound by them; a hard limit
// cannot be raised again without CAP_SYS_RESOURCE in the host namespace.
// nproc applies only where the kernel enforces it (not for host root).
func (l Limits) ulimitScript(nproc bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ulimit -HSt %d -HSv %d -HSf %d -HSn %d",
		l.CPUSeconds, (l.Memory+1023)/1024, (l.FileSize+1023)/1024, l.OpenFiles)
	if nproc {
		fmt.Fprintf(&b, " -HSu %d", l.Processes)
	}
	b.WriteString(" || exit 126")
	return b.String()
}

// ParseSize reads a byte count: a plain integer, or a number with one of
// the suffixes B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (all powers of
// 1024).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9') {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes such as 512MiB or 4GiB", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	var shift uint
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
	case "k", "kb", "kib":
		shift = 10
	case "m", "mb", "mib":
		shift = 20
	case "g", "gb", "gib":
		shift = 30
	case "t", "tb", "tib":
		shift = 40
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q (want B, KiB, MiB, GiB or TiB)", s, t[i:])
	}
	if n > (1<<63-1)>>shift {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n << shift, nil
}

// FormatSize writes n in the largest binary unit that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
