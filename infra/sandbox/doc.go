// Package sandbox gives each agent attempt a fresh, isolated shell: a
// Backend starts a Sandbox from a Harbor task directory; the Sandbox runs
// one-off commands (Exec) and persistent bash sessions (Shell), moves files
// in and out (Upload, Download), captures what the attempt changed as a
// tar layer (Snapshot) and replays it into a fresh sandbox (Restore).
// Close kills every process the sandbox started and removes its
// directories. The sandboxtest sub-package holds the conformance suite
// both backends pass.
//
// # Backends
//
// Bubblewrap (bwrap(1), Debian's 0.8.0 or newer) runs every command in new
// pid, network, ipc and uts namespaces and a user namespace of the
// sandbox's (see Users; --die-with-parent, --new-session). bwrap starts from an empty root; the
// sandbox binds the host's /usr, /etc and /var read-only, recreates the
// /bin, /sbin, /lib, /lib64 links, mounts a fresh /proc and /dev, binds
// the per-attempt host directories writable at
//
//	/app  /tmp  /logs (with /logs/verifier, /logs/agent)  /tests  /solution  /root  /var/tmp
//
// and remounts the root and /dev read-only, so every write lands where
// Snapshot looks (except /dev/shm, a 64 MiB tmpfs of its own). The network
// namespace holds only a loopback interface of its own: the host's
// 127.0.0.1 is unreachable. Each command is its own bwrap; state carries
// through the directories, and a Shell is one long-lived bwrap running
// bash.
//
// # Network
//
// Without Spec.Proxy (network policy none) that is all: no route, no
// DNS. With it (policy registries) every bwrap command is started with
// --info-fd and --block-fd: bwrap says its first process's pid and waits
// before running anything of the command's; the host makes the proxy's
// listening socket in that process's network namespace (egress.ListenIn,
// setns from a locked thread, so it needs the caller to be root), then
// lets it go on. Inside, 127.0.0.1:3128 is the proxy, the proxy variables
// are set (egress.Env, after the base environment, before the task's),
// and the host's certificate bundle is bound read-only at
// egress.CAPath in bwrap's /dev. The namespace still has loopback alone:
// a direct connection anywhere, or a DNS lookup, fails; the proxy
// carries only what its allow-list permits and logs every request. The
// listener is closed when its command ends, the proxy (the sandbox's
// own) by Close. Plain refuses a proxy: it shares the host's network.
//
// # Users
//
// When the caller is root, each sandbox has a block of IDBlock (65536)
// host ids of its own (allocBlock: B … B+65535, B a multiple of 65536
// from 2^30+2^24 to 2^31, held by an flock in /run/t1/sandbox-uids for
// the sandbox's life, whatever the process's TMPDIR, and never one that
// a process still runs as), and
// ids 0 … 65535 inside are those: root is B, uid 1000 is B+1000, so
// useradd, chown, su and runuser work as in Docker. The user namespace
// (userns.go) is made once per sandbox (and per other Cmd.User) by a
// bwrap running as its owner with --userns-block-fd, while this process
// writes the range into its uid_map and gid_map, which only a writer
// with CAP_SETUID above the namespace may do; a shell inside then sets
// its user.max_user_namespaces to 0. Every command's bwrap joins it
// (--userns, --assert-userns-disabled) as its owner and builds the
// sandbox there. Root inside keeps Docker's default capabilities less
// CAP_MKNOD and CAP_NET_RAW (sandboxCaps), in that namespace only; a
// numeric Cmd.User runs with none and group 0, as docker run --user
// does. bwrap's no_new_privs keeps setuid programs from raising anyone.
// Snapshots record owners as the sandbox sees them and Restore gives
// them to the same ids of the restoring sandbox's block; image layers
// are idmapped through the same range; Close kills every process of
// the block. A caller that is not root can map one id only: every
// command's bwrap makes a namespace of its own with that id as root,
// without capabilities, and Info().Reason says so. So does a sandbox
// without a cgroup (Limits.Cgroup optional): RLIMIT_NPROC counts each
// uid apart, and only the cgroup's task limit would bound a sandbox of
// many users.
//
// Every bwrap command also runs with no nested user namespaces
// (--disable-userns, or the limit above) under a seccomp filter (--seccomp; seccomp.go lists what it
// refuses: namespaces, mounts, keyrings, process_vm_*, bpf, perf_event_open,
// userfaultfd, io_uring, modules, kexec, and ptrace of pid 1 (bwrap's
// init; ptrace of the sandbox's own processes is allowed, as Docker
// allows it from Linux 4.8), with EPERM; clone3 with ENOSYS;
// any other syscall ABI than x86_64's kills the process), and inside a
// cgroup of the sandbox's own (see Limits). Info().Reason says which.
//
// Both backends keep an attempt's state in one host directory:
//
//	<Spec.TempDir>/t1-sandbox-<id>-<n>/   host user's, 0700 (root:<block's first gid> 0710), removed by Close
//	├── fs/                                 the writable directories, laid out as the sandbox sees them
//	│   ├── app/  tmp/  root/  tests/  solution/
//	│   ├── logs/verifier/  logs/agent/
//	│   └── var/tmp/
//	└── ctl/                                Shell control files; /run/t1 (read-only) under bwrap
//
// The root, fs/, fs/var and ctl/ belong to the host user and are closed
// to every other local user; when each sandbox runs as a host uid of its
// own (see Limits) they are root's, group the sandbox's gid, mode 0710,
// so bwrap can reach what it binds but the sandbox owns none of them.
// Whatever a command does to its own directories (chmod 777 /app) stays
// behind them.
//
// Plain runs commands as ordinary host processes for machines without
// bubblewrap. It isolates nothing, says so (a slog warning at every Start,
// Info().Isolated false and a Reason that rollouts copy into trajectory
// metadata), and maps the sandbox directories to host directories under
// the attempt root (Info().Paths). The API translates sandbox paths
// (Cmd.Dir, Upload, Download, Snapshot, Restore, the Dockerfile's WORKDIR
// and COPY); text inside commands is not translated, so a command that
// names /app must use the mapped path instead. HOME and TMPDIR point at
// the mapped /root and /tmp; Info().CommandPath maps a sandbox path to the
// path commands see. ByName returns Bubblewrap when bwrap is installed
// and a probe sandbox starts, and otherwise an error saying what to
// install: Plain only when unisolated execution was explicitly allowed.
//
// # Limits
//
// Every command starts under a bash prologue that sets soft and hard
// rlimits before exec'ing it (ulimit -t -v -f -n -u): CPU seconds, address
// space, file size, open files and processes. It runs inside the sandbox
// after bwrap has built it, so bwrap is not bound by them, and the
// sandbox cannot raise a hard limit again. RLIMIT_NPROC is counted per host
// uid and the kernel exempts host root, so when the caller is root the
// bwrap backend runs each sandbox as host ids of its own (its block, see
// Users; root inside is the block's first) and chowns the per-attempt
// directories to it: a fork bomb then stops at the limit and touches no
// other sandbox's budget. Each user of the block has a count of its own;
// the cgroup's task limit bounds them together. Every parent of Spec.TempDir must
// therefore be searchable by other users (o+x), as /tmp is, and no
// untrusted user may write to Spec.TempDir unless it is sticky. A caller that
// is not root runs bwrap as itself, and RLIMIT_NPROC then counts all of
// that user's processes. The plain backend runs as the caller, which
// RLIMIT_NPROC does not bind when that is root.
//
// rlimits bound each process, not the sandbox: under bwrap each sandbox
// also gets a cgroup (cgroup.go), created by Start under the cgroup this
// process runs in, v2 where the host has it and v1 hierarchies for the
// controllers v2 lacks (hybrid hosts use both), holding the memory of all
// its processes together, swap included (memory.max and memory.swap.max,
// or memory.limit_in_bytes and memory.memsw.limit_in_bytes, at
// Limits.Memory: page cache, tmpfs and SysV shared memory count), its
// tasks (pids.max, Limits.Processes) and its CPU bandwidth (cpu.max or
// cpu.cfs_quota_us, Limits.CPUs). Every bwrap of the sandbox starts
// inside it: clone3 with CLONE_INTO_CGROUP for v2; for v1 a thread of
// this process joins the sandbox's cgroups once and forks every bwrap of
// the sandbox. Close kills whatever is left in it (cgroup.kill, or each
// process listed under v1) and removes it. A host that offers no
// writable cgroup with the memory, pids and cpu controllers fails Start
// with the reason, unless Limits.Cgroup is CgroupOptional: the sandbox
// then runs under its rlimits alone, with a warning and Info().Reason
// saying so. The plain backend makes no cgroup.
//
// The disk budget (Limits.Disk, allocated bytes) and the inode budget
// (Limits.Inodes, every name: files, directories, links, each hard link)
// cover the writable directories together. How they are enforced is in
// Info().Disk:
//
//   - DiskTmpfs, when the caller is root: fs/ is a tmpfs of its own,
//     mounted on the host with size= the budget plus one page and
//     nr_inodes= the inode budget plus one (nosuid, nodev), unmounted by
//     Close. The kernel refuses what would go past it with ENOSPC, inside
//     the sandbox and to Restore alike, so nothing gets around it: not a
//     tree deeper than PATH_MAX, not a file deleted while held open, not
//     empty files by the thousand, not writers in parallel. The pages are
//     memory (RAM and swap), not disk: a machine running n sandboxes at
//     once must have room for n budgets, and where sandboxes have a memory
//     cgroup, the pages their processes write are charged to it. A root
//     caller that cannot mount (no CAP_SYS_ADMIN) fails Start with an
//     error saying so, rather than enforce less. If the calling process is
//     killed, the mount stays behind with the directory until the next t1
//     start removes both (see Leftovers).
//   - DiskMeasured, for callers that are not root and cannot mount on the
//     host: the directories are measured by a walk from file descriptors
//     (openat, fstatat: no path length limit, no link followed) plus the
//     deleted files the sandbox's processes still hold open (their
//     /proc/<pid>/fd). A tree deeper than 2048 levels counts as over the
//     budget (it cannot be snapshotted either). What is measured is exact,
//     but only every 200 ms (less often when one walk takes longer than
//     20 ms) and once after each command: writers in parallel overshoot
//     the budget by what they write in between, bounded per file by
//     RLIMIT_FSIZE.
//
// Either way a command that takes the directories past a budget is
// killed (a Shell's is interrupted), its Result has DiskExceeded, a
// non-zero exit code and the notice "disk limit exceeded" on Stderr (on a
// tmpfs, the writes that would have gone past it failed with ENOSPC
// first). Commands that run while the directories are still over the
// budget, without adding to it, run to the end with a reminder on Stderr,
// so that space can be freed. (bwrap's --size applies only to bwrap's own
// tmpfs mounts, inside each command's namespace, which the host could not
// snapshot or share across the per-command bwrap processes; the host-side
// tmpfs is bound into each of them like a directory.) The wall clock (Limits.WallClock) bounds
// each command; Cmd.Timeout and RunOptions.Timeout can only shorten it.
//
// # Processes
//
// Exec runs its command in a fresh process tree, and nothing it starts
// outlives it: under bwrap the pid namespace dies with its init; under
// Plain the process group is killed (a process that calls setsid escapes
// the group and lives until Close). Every sandbox process carries
// T1_SANDBOX=<Info().ID> in its environment, and Close kills, besides the
// tracked process trees, every process that carries the marker or runs as
// the sandbox's host uid. If the calling process itself is killed, bwrap
// follows it (parent-death signal) but the per-attempt directory stays
// behind under Spec.TempDir (t1-sandbox-*) until the next start removes
// it (see Leftovers). The environment is scrubbed: PATH, HOME,
// TERM=dumb, LANG=C.UTF-8, GIT_AUTHOR_DATE and GIT_COMMITTER_DATE (fixed at
// 2000-01-01, so reruns make identical commits), T1_SANDBOX (and TMPDIR
// under Plain), then the task's Dockerfile ENV, Spec.Env, and Cmd.Env.
//
// # Shell
//
// A Shell is bash --norc --noediting -i, fed one line per Run that evals a
// control file (/run/t1/<n>.sh, bound read-only) inside a redirected
// group and then prints a marker line with the exit status on stdout and
// one on stderr; output up to the markers is the command's. The eval runs
// in the shell itself, so cd, variables, functions and jobs persist; the
// group's redirections are undone afterwards, so a command that closes its
// stdout does not close the shell's. Output is bounded per stream: past
// MaxOutput the first and last halves are kept around a line "[… N bytes
// omitted …]". Bytes need not be UTF-8. On timeout the shell's process
// group gets SIGINT (what Ctrl-C sends; background jobs ignore it) and
// an interactive bash abandons the line; if the shell does not answer
// within two seconds (the command ignores SIGINT, or exec'd something that
// does), it is killed and started again, and the Result says Restarted
// with a notice on Stderr. A command that exits the shell restarts it the
// same way. Output that background jobs write between commands is given
// to the next command.
//
// # Task environments
//
// Start builds the initial state from the task directory's environment/:
//
//   - environment/Dockerfile: the subset that maps onto the host. FROM is
//     ignored (said in Info().Notes, with what the sandbox runs on: the
//     host's system directories, or the Spec.Image it was given; a second
//     FROM is refused), except that a python:* image's `python` is
//     provided as the root's /usr/bin/python3 where the root has no
//     /usr/bin/python, from a read-only directory first on PATH
//     (Info().Aliases, and the note says whose python it is); ARG, ENV
//     (both forms, with $VAR, ${VAR}, ${VAR:-x}, ${VAR:+x}), WORKDIR, COPY
//     and ADD of
//     files from environment/ (globs; --chmod; --chown ignored), and RUN
//     (shell form through /bin/sh -c, or exec form), executed in the
//     sandbox in order, with the sandbox's network (none, or the
//     registries proxy: see Network): without one RUN apt-get or pip install fails
//     with its own output in the error, and with a note that the sandbox
//     has no network when the command, parsed as shell, calls a package
//     manager or fetcher (runhint.go). EXPOSE, LABEL, MAINTAINER,
//     STOPSIGNAL, HEALTHCHECK, VOLUME, CMD and ENTRYPOINT are ignored (the
//     sandbox runs an agent's shell, not the image's command); USER root
//     is accepted. Anything else (ONBUILD, SHELL, USER of another user,
//     COPY --from, ADD of URLs or archives, here-documents, paths outside
//     the writable directories) fails with "file:line: … needs a container
//     backend". The last WORKDIR becomes the default directory.
//   - else environment/setup.sh: environment/ is copied to /tmp/t1-build,
//     setup.sh runs there as root under bash, and the copy is removed.
//
// The snapshot baseline is taken after that. /tests and /solution stay
// empty until the caller uploads them (Upload(ctx, task+"/tests",
// "/tests")) for the verifier or oracle step.
//
// # Image roots
//
// With Spec.Image (built by package image from the task's Dockerfile)
// bwrap starts from the image instead of the host's /usr, /etc and /var.
// Start, as root only, clones each layer as a read-only, nosuid, nodev
// mount idmapped through a user namespace that maps uid and gid 0 to the
// sandbox's host uid, and mounts an overlay of them (layers by
// descriptor, lowerdir+) at <root>/rootfs with its upper and work
// directories in fs/.image (0700 root, on the disk-budget tmpfs); bwrap
// binds it as / by descriptor, then /proc, /dev and the writable
// directories as usual, and leaves / writable: a write outside the
// writable directories is copied up into the attempt's own upper
// directory, counts against the disk budget, is in Snapshot (below), and
// goes with Close, which unmounts the overlay first. What the image holds in
// the writable directories (/app, /root, …) is copied into them at Start,
// before the baseline. The image's ENV and WORKDIR apply as a Dockerfile's
// do. Without root, overlayfs or idmapped mounts (Linux 6.8+, a layer
// filesystem that supports them), or with Image.FUSE, a fuse-overlayfs
// daemon of the caller's serves the layers instead (fuseroot.go), every
// file the sandbox's host uid's (squash_to_uid; the caller's when it is
// not root: root inside either way), opaque marks read from
// user.overlay.opaque, its upper directory in fs/.image under the disk
// budget (the daemon's open files counted too), / writable and in
// Snapshot as with the kernel overlay; Close unmounts it (fusermount3
// -u -z without root) and ends the daemon. An overlay mounted in a user
// namespace is no substitute: it shows the layers' root-owned files as
// nobody's and refuses every write to them, and bwrap 0.8 has no
// overlay options. Where FUSE is unusable too (no /dev/fuse the caller
// may open, fuse-overlayfs not installed), or with Image.Copy, the root
// is a per-attempt copy of the layers in <root>/rootfs (imagecopy.go:
// whiteouts and opaque directories applied, set-id bits dropped, every
// file the sandbox's host uid's, or the caller's when it is not root),
// bound read-only, since it lies outside the disk budget. Info().Notes
// and Reason say which root it is and why. A caller that is not root
// cannot read trusted.overlay.opaque and takes the layer's
// user.overlay.opaque copies instead, refusing a layer whose root lacks
// MarkedXattr. Nothing falls back to the host's system directories; the
// plain backend refuses an image.
//
// BuildRoot is the build side: an overlay of the layers below
// with a new upper directory, RUN through bwrap as host root in a network
// namespace of its own with BuildRoot.Proxy as its only way out (see
// SECURITY.md), COPY, COPY --from another stage's root (CopyFrom) and
// WORKDIR through the same no-link resolution as everything else here.
//
// # Snapshot layer format
//
// Snapshot writes a tar stream (PAX) in the style of an OCI image layer,
// relative to the sandbox root, to an io.Writer as it reads the files (no
// layer is held in memory; stages/rollout spools it to a temporary file
// to hash it before storing):
//
//	app/                     directory, only when new or its mode changed
//	app/main.py              regular file, new or changed: mode, mtime, contents
//	app/bin/tool -> ../x     symbolic link (target verbatim, never followed)
//	app/empty/               new empty directory
//	app/.wh.old.txt          whiteout: app/old.txt existed at the baseline and was deleted
//	root/.wh..cache          whiteout of a deleted directory (its contents implied)
//	tmp/notes                …every writable directory: app, tmp, logs, tests, solution, root, var/tmp
//
// Entries appear in byte order of the paths they describe, parents before
// children.
// A path whose type changed (file to directory, …) appears as its new self;
// Restore replaces what is there. Whiteouts are empty regular files named
// .wh.<name>; an opaque whiteout .wh..wh..opq (clear the directory) is
// accepted on Restore though Snapshot never writes one. Ownership is not
// recorded (every sandbox file belongs to the sandbox's single user);
// setuid and setgid bits are kept except where Restore would create
// root-owned host files (Plain as root). Hard links are stored as separate
// files; sockets, fifos and devices are left out. A file with holes is a
// PAX 1.0 sparse entry (GNU tar's --sparse-version=1.0: its data
// segments only, which archive/tar and GNU tar read back whole); Restore
// writes every zero-filled page as a hole, so a restored sandbox uses no
// more disk than the snapshotted one. Files are opened O_NONBLOCK and
// O_NOFOLLOW and checked with fstat: what a running process has turned
// into a fifo or a link since the scan is left out, never waited on.
//
// On an image root (an overlay, not a copy) the layer also holds what the
// attempt changed outside the writable directories, read from the
// overlay's upper directory beneath a descriptor, no link followed, and
// named from the root (usr/local/bin/tool, usr/bin/.wh.tac for a
// deletion, usr/share/doc/.wh..wh..opq after a directory that replaced
// the image's; fuse-overlayfs's own opaque marks are read as such), mount
// points the sandbox makes (proc, dev, run) left out. Restore applies
// such entries to an image root (a sandbox without one refuses them)
// through the merged root with the rules below, as far as the verifier
// can be trusted with them (rootlayer.go, rootGuard.admit): the
// restoring sandbox is the verifier's, whose own tools must stay the
// image's.
//
//   - Every change below the image's WORKDIR, as in /app, unless the
//     WORKDIR is / or lies under /usr, /etc or another system directory
//     (systemTops).
//   - Additions (names the image lacks) under /usr, /opt, /srv, /home,
//     /var, /mnt, /etc and every top-level directory that is not the
//     system's (/workspace, /data: as /srv), none that shadows a command the image has in
//     a directory of the verifier's PATH or a Python module it has on
//     sys.path, no .pth, sitecustomize or usercustomize in any
//     site-packages or dist-packages directory, no entry_points.txt
//     declaring a pytest plugin, no link where PATH or sys.path look.
//   - Edits, replacements and deletions of the image's files under /etc,
//     /opt, /srv, /home, /var, /mnt and the other data directories (not /usr, whose files are the
//     verifier's software), of files and links that are not programs:
//     no execute bit, no shared library, nothing below a bin, sbin,
//     libexec, site-packages, dist-packages or node_modules directory,
//     no hard link, and no edit that adds an execute bit. A deletion or
//     an opaque directory applies only when everything it removes passes
//     that (at most 10 000 entries).
//   - Never anything directly in / but directories (a /conftest.py or
//     /pytest.ini above /tests), nor in what the loader, Python, OpenSSL,
//     NSS, git or a shell read at start-up (/etc/ld.so.*, /etc/python3*,
//     /etc/ssl, /etc/nsswitch.conf, /etc/alternatives, /etc/profile, …:
//     protectedPaths).
//
// Hard links and devices in a layer fail Restore, and an entry below a
// link fails or is refused, as everywhere. Info().Notes says how many
// root changes were left out and names them (RestoreNote).
//
// A layer is bounded by the disk budget it came from: at most
// Limits.MaxLayer bytes (twice the disk budget, plus headers for each
// inode), its files at most Limits.MaxLogical with holes filled in (16 ×
// the budget; restoring reads through the holes), and no path longer
// than PATH_MAX. Snapshot returns an error wrapping ErrLayerLimit past
// any of them; Restore refuses a layer whose files hold more than the
// disk budget or add up to more than MaxLogical. Directory modification
// times are restored for the directories in the layer only, symbolic
// links' not at all.
//
// A file counts as changed when its inode, size, mtime or ctime differs
// from the baseline; ctime is set by the kernel on every write and cannot
// be set back from inside, so a change is never missed (a file rewritten
// with identical bytes is included again, which is harmless). Restore
// checks every name (clean, relative, inside a writable directory) and
// applies it under the containment rules below.
//
// # Leftovers
//
// Every per-attempt directory, disk-budget tmpfs, image root mount (kernel
// overlay or FUSE), image build overlay and cgroup directory is recorded
// in the host registry (package infra/hostres) under this process before
// it is made, and its record dropped once Close (or the error path that
// undoes it) has removed it. A process killed with SIGKILL leaves its
// records; ByName (which every command that makes sandboxes goes
// through) first removes what dead t1 processes of the same user
// recorded, and leaves every live process's alone. t1 sandbox ls shows
// what is recorded, with owner, age and usage; t1 sandbox reap removes
// what the dead left.
//
// # Containment of host-side operations
//
// The host acts on the sandbox's files as its own user (root, usually):
// building the environment, Upload, Download, Snapshot, Restore, the
// shell's control files. What it acts on is shaped by an adversary: the
// sandbox's commands, the task's files, a snapshot layer. So:
//
//   - No host-side operation follows a symbolic link in any component of
//     a name, the last included. Names are resolved beneath a directory
//     descriptor with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) (or
//     acted on with *at calls and AT_SYMLINK_NOFOLLOW on an entry whose
//     parent was so resolved); a link on the way fails the operation
//     with "a path component is a symbolic link". A COPY to
//     /app/up/var/tmp where /app/up is a link to .., or a layer entry
//     below such a link, is refused, not redirected onto another
//     directory.
//   - The writable directories are mount points: Upload, COPY and Restore
//     can empty them, never remove, rename or replace them (a layer entry
//     var/tmp that is a link is refused). bwrap binds them, and ctl/, by
//     descriptors opened when they were made (--bind-fd), so even a path
//     replaced since would not change what commands see.
//   - Control files are created afresh (O_EXCL, no link followed) in ctl/,
//     which the sandbox's uid cannot write, and handed to that uid with
//     fchown on the open descriptor.
//   - The task is read the same way below Spec.TaskDir (which is the
//     caller's to choose): environment/ and the Dockerfile must not be
//     links, and a COPY source (or glob) that goes through a link fails.
//     Links inside the build context are copied as links. Every caller —
//     t1 sandbox run --task, trial, the Go API — gets this from Start,
//     not from a task check it may have skipped.
//   - Download reads the sandbox's files without following links, copies
//     links as links, and writes the destination through a descriptor on
//     its parent, replacing (never writing through) a link already there.
//     A caller that reads what it downloaded must not follow links either
//     (verifier.ReadDir does not).
//
// Not covered: the host kernel (a kernel bug in namespaces, openat2 or
// the filesystem breaks all of this), side channels between sandboxes
// (timing, shared caches), and a Spec.TempDir or Spec.TaskDir path whose
// own parents an untrusted user controls.
package sandbox
