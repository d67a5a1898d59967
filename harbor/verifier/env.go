package verifier

import (
	"slices"

	"github.com/t1pipe/t1/harbor"
)

// Home is the verifier's HOME: a directory made empty just before the
// verifier runs, so nothing the agent left in /root (a user site-packages
// with usercustomize.py or a .pth file, a ~/.bashrc, shims in
// ~/.local/bin, a ~/.gitconfig) reaches it.
const Home = "/tmp/t1-verifier/home"

// Path is the verifier's PATH: system directories, which a sandboxed agent
// cannot write. It replaces whatever PATH the task's Dockerfile set, whose
// additions (/root/.local/bin, /app/.venv/bin) are agent-writable.
const Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hardened is set last, over the task's Dockerfile ENV and its [verifier]
// env: each variable names code to run before the tests, or a place to
// find it, and every place a task could name is one the agent can write.
// Empty values count as unset for bash, Python and the dynamic loader.
// PYTHONSAFEPATH is cleared, not set: every Python process of the tests
// would inherit it, and a test's `python run.py` could not import the
// modules beside run.py; t1's pytest runs isolated instead (WriteShims,
// WriteGuards).
func hardened(home string) []string {
	return []string{
		"PATH=" + Path,
		"HOME=" + home,
		"BASH_ENV=", "ENV=", // sourced by bash -c and sh before any script
		"PYTHONNOUSERSITE=1", "PYTHONSAFEPATH=", "PYTHONDONTWRITEBYTECODE=1",
		"PYTHONPATH=", "PYTHONHOME=", "PYTHONSTARTUP=", "PYTHONUSERBASE=",
		"LD_PRELOAD=", "LD_LIBRARY_PATH=", "LD_AUDIT=",
	}
}

// Env is what a verifier command adds to the sandbox's environment
// ("K=V", later entries win): the task's [verifier] env in key order, then
// the hardened variables with HOME at home.
func Env(t *harbor.Task, home string) []string {
	keys := make([]string, 0, len(t.Config.Verifier.Env))
	for k := range t.Config.Verifier.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	env := make([]string, 0, len(keys)+16)
	for _, k := range keys {
		env = append(env, k+"="+t.Config.Verifier.Env[k])
	}
	return append(env, hardened(home)...)
}
