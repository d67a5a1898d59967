package hostres

// LsHelp is t1 sandbox ls's long help.
const LsHelp = `Lists what t1 processes of this user recorded on this host (hostres):
per process its pid, uid, age and whether it is alive; per resource its
kind (tmpfs, overlay or FUSE mount, cgroup, directory, file), path, age,
bytes held (a mount's used space, a cgroup's charged memory) and tasks.
Sandbox mounts and cgroups (t1-sandbox-*) that no record names are listed
as unrecorded: nothing says whose they are, so nothing reaps them.`

// ReapHelp is t1 sandbox reap's long help.
const ReapHelp = `Removes what dead t1 processes of this user recorded on this host:
mounts (only the recorded file system at exactly the recorded path),
cgroups (their processes killed first), directories and files (never
following a link, never descending into another file system). A process
is dead when /proc/<pid>/stat no longer shows the start time it recorded.
Live processes, and other users' records, are left alone. Every t1
command that makes sandboxes does this first on its own.`
