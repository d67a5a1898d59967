package harbor

import (
	"os"
	"path/filepath"
	"slices"
)

// ExpandDirs replaces a dataset root (no task.toml, subdirectories with
// one) by its task subdirectories, sorted; any other path stays, for Load
// to say what it lacks.
func ExpandDirs(args []string) []string {
	var out []string
	for _, a := range args {
		if _, err := os.Stat(filepath.Join(a, ConfigFile)); err == nil {
			out = append(out, a)
			continue
		}
		ents, err := os.ReadDir(a)
		var subs []string
		if err == nil {
			for _, e := range ents {
				if _, err := os.Stat(filepath.Join(a, e.Name(), ConfigFile)); e.IsDir() && err == nil {
					subs = append(subs, filepath.Join(a, e.Name()))
				}
			}
		}
		if len(subs) == 0 {
			out = append(out, a) // Load reports what is missing
			continue
		}
		slices.Sort(subs)
		out = append(out, subs...)
	}
	return out
}
