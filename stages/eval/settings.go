package eval

import (
	"path/filepath"

	"github.com/t1pipe/t1/check"
	"github.com/t1pipe/t1/taskgen"
)

// Settings configure the held-out suite (stages.eval in pipeline.yaml).
type Settings struct {
	// Suite names the suite; empty turns evaluation off.
	Suite string `yaml:"suite"`
	// Tasks is the built-in tasks (0: none, only Dirs), grown through
	// Rounds extensions from the suite's own seed stream, Seed.
	Tasks  int    `yaml:"tasks"`
	Rounds int    `yaml:"rounds"`
	Seed   uint64 `yaml:"seed"`
	// Library is the step library the built-in tasks grow from (taskgen:
	// basic, basic-rename or full); training's is stages.synth.library.
	Library string `yaml:"library"`
	// Attempts is the attempts per task.
	Attempts int `yaml:"attempts"`
	// Dirs are Harbor task directories (or dataset roots) added to the
	// suite.
	Dirs []string `yaml:"dirs"`
}

// DefaultSettings evaluate on three built-in tasks.
func DefaultSettings() Settings {
	return Settings{Suite: "builtin", Tasks: 24, Rounds: 0, Seed: 1000, Library: string(taskgen.Basic), Attempts: 2, Dirs: []string{}}
}

// Check reports every invalid setting.
func (s Settings) Check(r check.Report) {
	if s.Suite == "" {
		return
	}
	r.AtLeast("attempts", s.Attempts, 1)
	r.AtLeast("tasks", s.Tasks, 0)
	r.AtLeast("rounds", s.Rounds, 0)
	if _, err := taskgen.ParseLibrary(s.Library); err != nil {
		r("library", "%v", err)
	}
	if s.Tasks == 0 && len(s.Dirs) == 0 {
		r("", "suite %q has no tasks: set tasks or dirs, or an empty suite to turn evaluation off", s.Suite)
	}
}

// Resolve returns the suite s configures, its relative directories taken
// from workDir (the directory the configuration's paths are relative to,
// which need not be the process's working directory by the time a stage
// runs).
func (s Settings) Resolve(workDir string) Suite {
	dirs := make([]string, len(s.Dirs))
	for i, d := range s.Dirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(workDir, d)
		}
		dirs[i] = filepath.Clean(d)
	}
	lib := taskgen.Library(s.Library)
	if lib == "" {
		lib = taskgen.Basic
	}
	return Suite{Builtin: s.Tasks > 0, Tasks: s.Tasks, Rounds: s.Rounds, Seed: s.Seed, Library: lib, Dirs: dirs}
}
