package sandbox

import (
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// fetchers maps a command to the sub-commands that fetch packages or
// files from the network (nil: every use does).
var fetchers = map[string][]string{
	"curl": nil, "wget": nil, "uvx": nil, "npx": nil, "add-apt-repository": nil,
	"apt-get": {"update", "install", "upgrade", "dist-upgrade", "full-upgrade", "download", "source", "build-dep"},
	"apt":     {"update", "install", "upgrade", "full-upgrade"},
	"apk":     {"add", "update", "upgrade"},
	"dnf":     {"install", "update", "upgrade", "makecache"},
	"yum":     {"install", "update", "upgrade", "makecache"},
	"pip":     {"install", "download", "wheel"},
	"pip3":    {"install", "download", "wheel"},
	"pipx":    {"install", "run"},
	"uv":      {"pip", "run", "tool", "sync", "add", "venv", "python", "lock"},
	"poetry":  {"install", "add", "lock", "update"},
	"conda":   {"install", "create", "update"},
	"mamba":   {"install", "create", "update"},
	"npm":     {"install", "i", "ci", "update"},
	"yarn":    {"add", "install"},
	"pnpm":    {"add", "install", "i"},
	"gem":     {"install"},
	"cargo":   {"install", "fetch", "build"},
	"go":      {"install", "get", "mod", "build"},
	"git":     {"clone", "fetch", "pull", "submodule"},
}

// wrappers run the command after their own options (sudo apt-get …).
var wrappers = []string{"sudo", "env", "exec", "command", "nohup", "time", "timeout", "xargs", "nice", "stdbuf"}

// installs reports whether a RUN command calls a package manager or
// fetcher that needs the network: argv for the exec form, else the shell
// form's text, parsed as a shell program. Text that does not parse is
// taken as not installing: the hint is for installs only.
func installs(raw string, argv []string) bool {
	if argv != nil {
		return fetches(argv)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(raw), "RUN")
	if err != nil {
		return false
	}
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || found {
			return !found
		}
		words := make([]string, 0, len(call.Args))
		for _, w := range call.Args {
			words = append(words, w.Lit())
		}
		found = fetches(words)
		return true
	})
	return found
}

// fetches reports whether one simple command's words fetch: its command,
// past wrappers and their options, names a fetcher (python3 -m pip too).
func fetches(words []string) bool {
	i := 0
	for i < len(words) && (slices.Contains(wrappers, path.Base(words[i])) || strings.HasPrefix(words[i], "-") || strings.Contains(words[i], "=") || isNumber(words[i])) {
		i++
	}
	if i >= len(words) {
		return false
	}
	cmd := path.Base(words[i])
	if strings.HasPrefix(cmd, "python") && i+2 < len(words) && words[i+1] == "-m" {
		i += 2
		cmd = words[i]
	}
	subs, ok := fetchers[cmd]
	if !ok {
		return false
	}
	if subs == nil {
		return true
	}
	for _, w := range words[i+1:] {
		if !strings.HasPrefix(w, "-") {
			return slices.Contains(subs, w)
		}
	}
	return false
}

func isNumber(w string) bool { return w != "" && strings.Trim(w, "0123456789.smhd") == "" }
