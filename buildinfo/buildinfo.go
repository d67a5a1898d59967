// Package buildinfo names the build of the running binary.
package buildinfo

import (
	"fmt"
	"io"
	"runtime/debug"
)

// Info is what `t1 version` says.
type Info struct {
	Go      string `json:"go"`
	Version string `json:"version"`
}

// Of is the running binary's Info; set is the version a release set.
func Of(set string) Info { return Info{Go: Go(), Version: Version(set)} }

// WriteText prints the version and the toolchain on one line.
func (i Info) WriteText(w io.Writer) { fmt.Fprintf(w, "t1 %s (%s)\n", i.Version, i.Go) }

// Version is set, when it is not empty (a release's -ldflags), else the
// VCS revision the binary was built from, else the module's version.
func Version(set string) string {
	if set != "" {
		return set
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if dirty {
				rev += "-dirty"
			}
			return "dev-" + rev
		}
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
	}
	return "dev"
}

// Go is the toolchain the binary was built with.
func Go() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "unknown"
}
