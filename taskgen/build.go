package taskgen

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/t1pipe/t1/schemas"
)

// StepRef is one step of a task (schemas.StepRef, as events carry it):
// which step, its seed, and the index of the step whose artifact it
// consumes (every step produces exactly one), -1 for a source.
type StepRef = schemas.StepRef

// Spec is a task folded from its steps.
type Spec struct {
	Steps       []StepRef
	Env         []File // absolute paths, in step order
	Solution    []string
	Checks      []Check
	Phrases     []string
	Instruction string
	Category    string
	Difficulty  string
	Artifacts   []*Artifact
	// Work counts the steps that add to the solution (not sources).
	Work int
}

// Build folds refs into a task. It fails only on refs that do not fit
// together (an unknown step, an input of the wrong kind), which a stored
// lineage never holds unless it was tampered with.
func Build(refs []StepRef) (*Spec, error) {
	if len(refs) == 0 {
		return nil, fmt.Errorf("synth: a task needs at least one step")
	}
	sp, err := fold(refs)
	if err != nil {
		return nil, err
	}
	if sp.Work == 0 {
		return nil, fmt.Errorf("synth: a task needs at least one step that does work, not only sources")
	}
	switch {
	case sp.Work <= 2:
		sp.Difficulty = "easy"
	case sp.Work <= 4:
		sp.Difficulty = "medium"
	default:
		sp.Difficulty = "hard"
	}
	if LibraryOf(refs) != Full {
		sp.Instruction = briefInstruction(sp.Phrases)
	} else {
		sp.Instruction = instruction(sp.Phrases)
	}
	return sp, nil
}

// fold applies refs in order.
func fold(refs []StepRef) (*Spec, error) {
	sp := &Spec{Steps: slices.Clone(refs)}
	g := &Gen{taken: map[string]bool{}}
	for i, ref := range refs {
		st, ok := registry[ref.Name]
		if !ok {
			return nil, fmt.Errorf("synth: step %d: unknown step %q", i, ref.Name)
		}
		var in *Artifact
		if len(st.Consumes()) > 0 {
			if ref.Input < 0 || ref.Input >= len(sp.Artifacts) {
				return nil, fmt.Errorf("synth: step %d (%s): input %d out of range (%d artifacts)", i, ref.Name, ref.Input, len(sp.Artifacts))
			}
			in = sp.Artifacts[ref.Input]
			if !slices.Contains(st.Consumes(), in.Kind) {
				return nil, fmt.Errorf("synth: step %d (%s): cannot consume a %s artifact (%s)", i, ref.Name, in.Kind, in.Path)
			}
		} else if ref.Input != -1 {
			return nil, fmt.Errorf("synth: step %d (%s) is a source and takes no input", i, ref.Name)
		}
		g.rng = rand.New(rand.NewPCG(ref.Seed, uint64(i)))
		c := st.Apply(g, in)
		if len(c.Produces) != 1 {
			panic(fmt.Sprintf("synth: step %s produced %d artifacts, want 1", ref.Name, len(c.Produces)))
		}
		for j := range c.Checks {
			c.Checks[j].Name = fmt.Sprintf("test_s%02d_%s", i+1, c.Checks[j].Name)
		}
		for _, a := range c.Produces {
			a.Producer = i
		}
		if c.Replaces {
			in.Replaced = true
		}
		sp.Env = append(sp.Env, c.Env...)
		sp.Solution = append(sp.Solution, c.Solution...)
		sp.Checks = append(sp.Checks, c.Checks...)
		sp.Artifacts = append(sp.Artifacts, c.Produces...)
		if c.Phrase != "" {
			sp.Phrases = append(sp.Phrases, c.Phrase)
		}
		if len(st.Consumes()) > 0 {
			sp.Work++
			sp.Category = st.Category()
		}
	}
	return sp, nil
}

// instruction is written last, from the phrases of the steps the solution
// performs, so it asks for exactly the work the verifier checks.
func instruction(phrases []string) string {
	var b strings.Builder
	b.WriteString("You are working in a Linux shell; the task's files are under /app.\n\n")
	if len(phrases) == 1 {
		b.WriteString(phrases[0])
		b.WriteString("\n")
	} else {
		b.WriteString("Do the following, in order (later steps use what earlier ones produce):\n\n")
		for i, p := range phrases {
			fmt.Fprintf(&b, "%d. %s\n", i+1, p)
		}
	}
	b.WriteString("\nCreate any missing output directories. Leave the input files unchanged unless a step says to change them.\n")
	return b.String()
}

// briefInstruction is the basic library's: only the phrases, every
// parameter in them, so the prompt is short and all of it matters.
func briefInstruction(phrases []string) string {
	if len(phrases) == 1 {
		return phrases[0] + "\n"
	}
	var b strings.Builder
	b.WriteString("In order:\n")
	for i, p := range phrases {
		fmt.Fprintf(&b, "%d. %s\n", i+1, p)
	}
	return b.String()
}

// ID is a stable identifier of the task's content: equal step lists give
// equal ids.
func (sp *Spec) ID() string {
	data, _ := json.Marshal(sp.Steps)
	sum := sha256.Sum256(data)
	return "syn-" + hex.EncodeToString(sum[:6])
}

// SetupScript writes the environment's files. It is self-contained (the
// files travel base64-encoded inside it), so it runs the same wherever
// the environment directory is placed.
func (sp *Spec) SetupScript() string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n# Prepares the task's environment.\nset -euo pipefail\n")
	for _, f := range sp.Env {
		dir := f.Path[:strings.LastIndexByte(f.Path, '/')]
		fmt.Fprintf(&b, "mkdir -p %s\nbase64 -d > %s <<'T1_EOF'\n", sh(dir), sh(f.Path))
		enc := base64.StdEncoding.EncodeToString(f.Data)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\n")
			enc = enc[76:]
		}
		b.WriteString(enc + "\nT1_EOF\n")
		fmt.Fprintf(&b, "chmod %o %s\n", f.mode(), sh(f.Path))
	}
	return b.String()
}

// SolveScript is the reference solution.
func (sp *Spec) SolveScript() string {
	return "#!/bin/bash\n# Reference solution.\nset -euo pipefail\ncd /app\n" + strings.Join(sp.Solution, "\n") + "\n"
}

// TestScript runs the assertions with the sandbox's own pytest and leaves
// a JUnit report, one test case per assertion, where the verifier reader
// looks first after CTRF.
func TestScript() string {
	return `#!/bin/bash
# Runs the assertions; one JUnit test case per assertion.
mkdir -p /logs/verifier
cd /tests
python3 -m pytest -q -p no:cacheprovider -rA --junitxml=/logs/verifier/junit.xml /tests/test_outputs.py
`
}

// TestFile is the pytest module holding one function per assertion.
func (sp *Spec) TestFile() string {
	var b strings.Builder
	b.WriteString(`"""Assertions for this task; each function checks one thing."""
import csv
import gzip
import hashlib
import json
import os
import stat
import subprocess
import tarfile
from pathlib import Path


def read_lines(p):
    return Path(p).read_text().rstrip("\n").split("\n") if Path(p).read_text().strip() else []


def read_csv(p):
    with open(p, newline="") as f:
        return [row for row in csv.reader(f) if row]
`)
	for _, c := range sp.Checks {
		fmt.Fprintf(&b, "\n\ndef %s():\n", c.Name)
		for _, l := range c.Body {
			b.WriteString("    " + l + "\n")
		}
	}
	return b.String()
}

// Files returns the task's files other than task.toml, by path relative to
// the task directory.
func (sp *Spec) Files() []File {
	return []File{
		{Path: "instruction.md", Data: []byte(sp.Instruction)},
		{Path: "environment/setup.sh", Data: []byte(sp.SetupScript()), Mode: 0o755},
		{Path: "solution/solve.sh", Data: []byte(sp.SolveScript()), Mode: 0o755},
		{Path: "tests/test.sh", Data: []byte(TestScript()), Mode: 0o755},
		{Path: "tests/test_outputs.py", Data: []byte(sp.TestFile())},
	}
}
