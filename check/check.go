// Package check is the one idiom by which a stage's settings say what is
// wrong with them. Each stage declares its settings beside its code:
//
//	type Settings struct{ ... }             // fields with yaml tags and doc comments
//	func DefaultSettings() Settings         // the built-in values
//	func (s Settings) Check(r check.Report) // every invalid value, by key path
//
// Check reports a problem by its key path relative to the settings' own
// section ("pool_target", "llm.url", "dirs[0]"; "" for the section as a
// whole); package config, which mounts each stage's settings under
// stages.<stage>, adds the section with Under and places every problem at
// its line and column in the file.
package check

import (
	"strings"
	"time"
)

// Report records one problem: the key path it is about and a message.
type Report func(path, format string, args ...any)

// Under reports the problems of a subsection: their paths are prefixed
// with section.
func (r Report) Under(section string) Report {
	return func(path, format string, args ...any) { r(Join(section, path), format, args...) }
}

// AtLeast reports an integer below min.
func (r Report) AtLeast(path string, v, min int) {
	if v < min {
		r(path, "must be at least %d, got %d", min, v)
	}
}

// Positive reports a duration that is zero or negative.
func (r Report) Positive(path string, d time.Duration) {
	if d <= 0 {
		r(path, "must be positive, got %s", d)
	}
}

// Join appends the relative key path rel to section: Join("stages.eval",
// "dirs[0]") is "stages.eval.dirs[0]", and an empty rel names the section
// itself.
func Join(section, rel string) string {
	switch {
	case rel == "":
		return section
	case section == "" || strings.HasPrefix(rel, "["):
		return section + rel
	}
	return section + "." + rel
}
