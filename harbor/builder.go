package harbor

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"strings"
)

// Builder assembles a task in memory, for code that generates tasks. Every
// setter records the first problem; Build reports it along with anything
// the validation of Load finds.
//
//	t, err := harbor.NewBuilder("csv-dedupe").
//		Instruction("Remove duplicate rows from /app/data.csv …").
//		Metadata(harbor.Metadata{Difficulty: "easy", Category: "data-processing"}).
//		SetupScript("mkdir -p /app && printf 'a\na\n' > /app/data.csv\n").
//		Solution("sort -u /app/data.csv -o /app/data.csv\n").
//		TestScript("#!/bin/bash\npytest /tests/test_outputs.py\n").
//		TestFile("test_outputs.py", src).
//		Build()
type Builder struct {
	t   *Task
	err error
}

// NewBuilder starts a task named name with an empty task.toml
// (version = "1.0").
func NewBuilder(name string) *Builder {
	return &Builder{t: &Task{Name: name, Config: &Config{SchemaVersion: "1.0"}, Files: map[string]File{}}}
}

// From starts from an existing task (deep copy), e.g. a seed to extend.
func From(t *Task) *Builder {
	c := *t.Config
	typed := t.Config.typed()
	c.SchemaVersion, c.Metadata, c.Verifier, c.Agent, c.Environment = typed.SchemaVersion, typed.Metadata, typed.Verifier, typed.Agent, typed.Environment
	files := make(map[string]File, len(t.Files))
	for p, f := range t.Files {
		f.Data = append([]byte(nil), f.Data...)
		files[p] = f
	}
	return &Builder{t: &Task{Name: t.Name, Instruction: t.Instruction, Config: &c, Files: files}}
}

func (b *Builder) fail(err error) *Builder {
	if b.err == nil {
		b.err = err
	}
	return b
}

// Name sets the task name.
func (b *Builder) Name(name string) *Builder { b.t.Name = name; return b }

// Instruction sets instruction.md.
func (b *Builder) Instruction(s string) *Builder { b.t.Instruction = s; return b }

// Metadata sets [metadata].
func (b *Builder) Metadata(m Metadata) *Builder { b.t.Config.Metadata = m; return b }

// Timeouts sets [agent] and [verifier] timeout_sec (0 leaves a key unset).
func (b *Builder) Timeouts(agentSec, verifierSec float64) *Builder {
	b.t.Config.Agent.TimeoutSec, b.t.Config.Verifier.TimeoutSec = agentSec, verifierSec
	return b
}

// Environment sets [environment].
func (b *Builder) Environment(e EnvironmentConfig) *Builder { b.t.Config.Environment = e; return b }

// Config gives direct access to the task.toml being built.
func (b *Builder) Config() *Config { return b.t.Config }

// File adds or replaces a file at the slash-separated path p with the
// given permission bits (0 means 0644).
func (b *Builder) File(p string, data []byte, mode fs.FileMode) *Builder {
	if err := checkName(p); err != nil {
		return b.fail(fmt.Errorf("file %q: %w", p, err))
	}
	if p == InstructionFile || p == ConfigFile {
		return b.fail(fmt.Errorf("file %q: use Instruction or Config", p))
	}
	if mode&^fs.ModePerm != 0 {
		return b.fail(fmt.Errorf("file %q: mode %v has more than permission bits", p, mode))
	}
	if mode == 0 {
		mode = 0o644
	}
	b.t.Files[p] = File{Mode: mode, Data: append([]byte(nil), data...)}
	return b
}

// Remove deletes a file (no error if absent).
func (b *Builder) Remove(p string) *Builder { delete(b.t.Files, p); return b }

// Dockerfile sets environment/Dockerfile.
func (b *Builder) Dockerfile(s string) *Builder { return b.File(DockerfilePath, []byte(s), 0o644) }

// SetupScript sets environment/setup.sh (executable).
func (b *Builder) SetupScript(s string) *Builder {
	return b.File(SetupScriptPath, []byte(s), 0o755)
}

// EnvironmentFile adds a file under environment/.
func (b *Builder) EnvironmentFile(name string, data []byte, mode fs.FileMode) *Builder {
	return b.File(EnvironmentDir+"/"+strings.TrimPrefix(name, "/"), data, mode)
}

// Solution sets solution/solve.sh (executable).
func (b *Builder) Solution(script string) *Builder {
	return b.File(SolutionPath, []byte(script), 0o755)
}

// TestScript sets tests/test.sh (executable).
func (b *Builder) TestScript(script string) *Builder {
	return b.File(TestScriptPath, []byte(script), 0o755)
}

// TestFile adds a file under tests/.
func (b *Builder) TestFile(name string, data []byte) *Builder {
	return b.File(TestsDir+"/"+strings.TrimPrefix(name, "/"), data, 0o644)
}

// Build validates the task and returns it; the builder must not be used
// afterwards.
func (b *Builder) Build() (*Task, error) {
	if b.err != nil {
		return nil, fmt.Errorf("task %s: %w", b.t.Name, b.err)
	}
	if b.t.Name == "" {
		return nil, errors.New("task: name is empty")
	}
	if err := b.t.Validate(); err != nil {
		return nil, err
	}
	t := b.t
	t.Files = maps.Clone(t.Files)
	return t, nil
}
