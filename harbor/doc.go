// Package harbor reads, writes, hashes and bundles tasks in the Harbor /
// Terminal-Bench 2 task format, so that real benchmark tasks and t1's own
// synthesised tasks are the same thing.
//
// # Task directory
//
//	<task>/
//	├── instruction.md        required; UTF-8, not empty: the agent's prompt
//	├── task.toml             required; see below
//	├── environment/          Dockerfile (WORKDIR/COPY/ENV/RUN …) or setup.sh, plus files
//	├── solution/solve.sh     the reference solution (optional, as in Harbor)
//	└── tests/
//	    ├── test.sh           required; the verifier entry point
//	    └── test_*.py …       files the verifier uses (copied to /tests)
//
// # task.toml
//
//	version = "1.0"                   # or schema_version = "1.1" (Harbor ≥ 1.1)
//	[task]                            # Harbor 1.1 package info: kept verbatim
//	[metadata]  author_name, author_email, difficulty (easy|medium|hard),
//	            category, tags, expert_time_estimate_min, junior_time_estimate_min
//	[verifier]  timeout_sec (default 600), env = { … }
//	[[verifier.services]]  command, port (optional): t1's extension, a
//	            service the tests talk to, started again for the verifier
//	            (Config.Services; at most MaxServices)
//	[agent]     timeout_sec (unset: no limit)
//	[environment] build_timeout_sec (600), docker_image, cpus (1),
//	            memory_mb (2048) | memory = "2G", storage_mb (10240) | storage = "10G",
//	            gpus, allow_internet, …
//	[solution]  env = { … }           # kept verbatim, like every key not listed
//
// Unknown keys survive a read→write round trip. A Config that was not
// edited marshals to the exact bytes it was parsed from; an edited one is
// re-emitted canonically (Harbor's section order, sorted keys, comments
// dropped). Errors name the file and the field ("task.toml: [metadata]
// difficulty: …"), or the line and column of a TOML syntax error.
//
// # Identity
//
// Task.Hash is SHA-256 over every file, instruction.md and task.toml
// included, in path order; each file is framed as
//
//	len(path) ":" path NUL mode(octal: 644|755|777) NUL len(link) ":" link NUL len(data) ":" data "\n"
//
// with modes normalised to what git records, so two checkouts of one task
// agree. Task.ID is "task-" and the first 20 hex digits of the hash.
//
// # Bundle
//
// A bundle is a tar, gzip-compressed, of the task directory: entries sorted
// by path, every parent directory its own entry, mtime 0, uid/gid 0
// without names, modes 0644/0755 (0777 for links), no gzip name or time.
// Equal tasks give byte-equal bundles; the SHA-256 of the bytes is returned
// by Bundle. ReadBundle and Extract also accept zstd or uncompressed tar.
// Both refuse absolute paths, ".." traversal, entries below a link, links
// whose target leaves the root (followed through other links the way the
// kernel would), hard links, devices, FIFOs and other special entries, and
// they enforce Limits (per file, in total, entry count, and the
// decompressed stream itself); errors name the entry.
//
// Builder assembles tasks in memory for code that generates them;
// Task.FS gives a read-only fs.FS view of a task (for os.CopyFS or a walk)
// without a temporary directory.
package harbor
