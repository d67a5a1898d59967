// Package hostres records what t1 creates on the host for a sandbox or a
// run (tmpfs, overlay and FUSE mounts, cgroups, per-attempt and scratch
// directories, temporary files) under the process that owns it, so that
// whatever a process leaves behind when it dies can be told apart from
// what a live process still uses, and removed.
//
// The registry is a directory per owner under the runtime directory
// (RootDir: /run/t1/owners for root, else $XDG_RUNTIME_DIR/t1/owners or
// <tmp>/t1-<uid>/owners, or $T1_RUNTIME_DIR/owners), named <pid>-<start> where start is the owner's
// start time in clock ticks after boot (field 22 of /proc/<pid>/stat):
// a pid reused by another process has another start time. Its file
// "owner" holds the pid, start time, boot id, uid and command line; each
// resource is one file <seq>.json (kind, path, file system, note, time),
// written before the resource is created, so that a process killed
// between the two leaves a record of something that may not exist,
// never a resource without a record. Release removes the record once the
// resource is gone.
//
// An owner is alive while /proc/<pid>/stat shows the recorded start time
// under the same boot id. Reap removes the resources of owners that are
// not, newest first, and then their directories; it takes an owner's
// lock (flock on "owner") first, so two reapers never work on one owner.
// It leaves alone every live owner's records and every owner directory
// that is not the caller's uid's (another user's, or planted). Removal
// never follows a link: a directory or file is removed through a
// descriptor on its parent opened with openat2(RESOLVE_NO_SYMLINKS) from
// /, its contents by descriptor (unlinkat, O_NOFOLLOW), and a directory
// that holds a mount after everything recorded under it was unmounted is
// left with an error rather than descended into; a mount is unmounted
// (MNT_DETACH|UMOUNT_NOFOLLOW) only when /proc/self/mountinfo shows the
// recorded file system at exactly the recorded path; a cgroup only when
// its path lies on a cgroup file system, after its processes are killed.
// A resource that cannot be removed keeps its record, and the owner its
// directory, so that List shows it.
//
// The first Record of a process reaps the dead owners before it creates
// its own directory (Start does it alone; the sandbox backends call it
// when they are chosen), so every command that creates sandboxes cleans
// up after the runs killed before it; Exit, at the end of a command
// (after SIGINT and SIGTERM too), removes whatever the process still
// records (what an error path or a signal left). A process killed with
// SIGKILL leaves its records for the next one. Leaks, at the end of a
// test binary, lists and removes what the binary itself still records
// and what the t1 processes it started and that have ended left.
//
// Point lets a test kill the process (SIGKILL) at a named point, when
// T1_KILL_AT names it; it does nothing otherwise.
package hostres
