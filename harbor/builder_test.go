package harbor

import (
	"path/filepath"
	"strings"
	"testing"
)

const testOutputs = `def test_sorted():
    assert open("/app/data.csv").read() == "a\nb\n"
`

func buildSample(t *testing.T) *Task {
	t.Helper()
	allow := false
	task, err := NewBuilder("csv-dedupe").
		Instruction("Remove duplicate rows from /app/data.csv, keeping it sorted.\n").
		Metadata(Metadata{AuthorName: "t1 synth", Difficulty: "easy", Category: "data-processing", Tags: []string{"csv"}}).
		Timeouts(600, 120).
		Environment(EnvironmentConfig{CPUs: 1, MemoryMB: 1024, AllowInternet: &allow}).
		SetupScript("#!/bin/bash\nmkdir -p /app && printf 'b\\na\\nb\\n' > /app/data.csv\n").
		Solution("#!/bin/bash\nsort -u /app/data.csv -o /app/data.csv\n").
		TestScript("#!/bin/bash\npython3 -m pytest -rA /tests/test_outputs.py\n").
		TestFile("test_outputs.py", []byte(testOutputs)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestBuilder(t *testing.T) {
	task := buildSample(t)
	dir := filepath.Join(t.TempDir(), "csv-dedupe")
	must(t, task.Write(dir))
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := back.Config
	if c.Metadata.Difficulty != "easy" || c.Agent.TimeoutSec != 600 || c.Verifier.TimeoutSec != 120 ||
		c.Environment.MemoryMB != 1024 || *c.Environment.AllowInternet || back.EnvironmentKind() != "setup.sh" {
		t.Fatalf("config after write/load: %+v", c)
	}
	if !back.Files[SolutionPath].Executable() || !back.Files[TestScriptPath].Executable() || back.Files["tests/test_outputs.py"].Executable() {
		t.Fatal("modes")
	}
	h1, _ := task.Hash()
	h2, _ := back.Hash()
	if h1 != h2 {
		t.Fatal("hash differs after write/load")
	}
	// The content hash is a stable identity: this value may only change
	// together with the hash framing (which renames every stored task).
	if id, _ := task.ID(); id != goldenBuilderID {
		t.Fatalf("ID %s, golden %s", id, goldenBuilderID)
	}

	// Extending a seed leaves the seed alone.
	ext, err := From(back).Instruction(back.Instruction+"Then count them.\n").
		File("solution/count.sh", []byte("#!/bin/sh\nwc -l /app/data.csv\n"), 0o755).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := back.Files["solution/count.sh"]; ok || strings.Contains(back.Instruction, "count") {
		t.Fatal("From aliases the seed")
	}
	if h3, _ := ext.Hash(); h3 == h2 {
		t.Fatal("extended task hashes like its seed")
	}
}

const goldenBuilderID = "task-bba68898365f93767361"

func TestBuilderErrors(t *testing.T) {
	cases := map[string]struct {
		b    *Builder
		want string
	}{
		"no test script":    {NewBuilder("x").Instruction("i"), "tests/test.sh: required file is missing"},
		"bad difficulty":    {NewBuilder("x").Instruction("i").TestScript("true").Metadata(Metadata{Difficulty: "legendary"}), `[metadata] difficulty: "legendary"`},
		"negative timeout":  {NewBuilder("x").Instruction("i").TestScript("true").Timeouts(-1, 0), "[agent] timeout_sec: must not be negative"},
		"empty instruction": {NewBuilder("x").TestScript("true"), "instruction.md: is empty"},
		"traversal":         {NewBuilder("x").File("../etc/passwd", nil, 0), `file "../etc/passwd"`},
		"reserved name":     {NewBuilder("x").File("task.toml", nil, 0), "use Instruction or Config"},
		"setuid":            {NewBuilder("x").File("environment/x", nil, 0o4755), "more than permission bits"},
		"non-UTF-8":         {NewBuilder("x").Instruction("caf\xe9").TestScript("true"), "not valid UTF-8"},
		"file under file":   {NewBuilder("x").Instruction("i").TestScript("true").File("tests/test.sh/x", nil, 0), "tests/test.sh is a file"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.b.Build()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}
