package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/t1pipe/t1/"

// listedPackage is what `go list -json` says of one package.
type listedPackage struct {
	ImportPath  string
	Imports     []string
	TestImports []string
	Deps        []string
}

func listPackages(t *testing.T) map[string]listedPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,Deps", "../...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listedPackage{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	return pkgs
}

func internal(paths []string) []string {
	var out []string
	for _, p := range paths {
		if strings.HasPrefix(p, module) {
			out = append(out, strings.TrimPrefix(p, module))
		}
	}
	return out
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// The layering of ARCHITECTURE.md §3: stages talk through events only, the
// core packages import no adapter, and nothing imports a command.
func TestLayering(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for name, p := range pkgs {
		direct := internal(append(append([]string{}, p.Imports...), p.TestImports...))
		for _, imp := range direct {
			if under(name, "stages") && under(imp, "stages") && stageOf(name) != stageOf(imp) {
				t.Errorf("stage %s imports stage %s", name, imp)
			}
			if under(imp, "cmd") && !under(name, "cmd") {
				t.Errorf("%s imports %s: nothing imports a command", name, imp)
			}
			if (name == "report" || name == "digest") && under(imp, "stages") {
				t.Errorf("%s imports stage %s", name, imp)
			}
			// The wiring sits above everything it wires: config assembles
			// the settings of the layers below it, whose own checks need
			// only package check.
			if lower(name) && (wiring[imp] || under(imp, "config") || under(imp, "stages") && !under(name, "stages")) {
				t.Errorf("%s imports %s, a layer above it", name, imp)
			}
		}
		// Pure packages work on what they are handed: no stage, adapter
		// or wiring beneath them.
		if pure[name] {
			for _, dep := range internal(p.Deps) {
				if under(dep, "stages") || under(dep, "infra") || wiring[dep] {
					t.Errorf("%s depends on %s: it is pure", name, dep)
				}
			}
		}
		if name == "tokenizer" {
			for _, dep := range internal(p.Deps) {
				if dep != "tokenizer" {
					t.Errorf("tokenizer depends on %s: it imports nothing of the project", dep)
				}
			}
		}
		// The stages and what they are built from write and read rows with
		// parquet-go and reach S3 as clients: arrow-go (the readers'
		// columnar view) and the embedded gateway (in-process runs) would
		// only make every binary that links them larger and slower to link.
		if lower(name) && name != "infra/s3/gateway" || name == "schemas" || name == "engine" {
			for _, dep := range p.Deps {
				if strings.HasPrefix(dep, "github.com/apache/arrow-go/") || strings.HasPrefix(dep, "github.com/versity/versitygw") {
					t.Errorf("%s depends on %s", name, dep)
					break
				}
			}
		}
		// The gateway runs in a process of its own (package embedded):
		// only the programs that serve it link it.
		if name != "cmd/t1" && name != "internal/testinfra/gatewayd" && name != "infra/s3/gateway" {
			for _, dep := range append(append([]string(nil), p.Imports...), p.TestImports...) {
				if dep == module+"infra/s3/gateway" {
					t.Errorf("%s imports infra/s3/gateway: start the store with infra/s3/embedded", name)
				}
			}
		}
		core := name == "schemas" || under(name, "schemas/") || name == "engine" || name == "rl" || name == "keys"
		if !core {
			continue
		}
		for _, dep := range internal(p.Deps) {
			if under(dep, "infra") {
				t.Errorf("%s depends on the adapter %s", name, dep)
			}
			if name == "rl" && dep != "rl" {
				t.Errorf("rl depends on %s: it is arithmetic on plain numbers", dep)
			}
			if name != "engine" && dep == "engine" {
				t.Errorf("%s depends on engine", name)
			}
		}
	}
}

// wiring are the packages that assemble a process from its configuration:
// the configuration itself, what brings up its servers and builds its
// stages, and what runs a run, a stage, an evaluation, an ablation, one
// episode or the reference policy in a process. Only the command and the
// tests sit above them.
var wiring = map[string]bool{"config": true, "local": true, "pipeline": true, "execute": true, "worker": true, "evaljob": true, "ablation": true, "episode": true, "policy": true}

// pure are packages of plain logic over what they are handed.
var pure = map[string]bool{"exit": true, "query": true, "buildinfo": true}

// lower reports whether pkg sits below the wiring: the stages and what
// they are built from.
func lower(pkg string) bool {
	for _, dir := range []string{"stages", "infra", "harbor", "update"} {
		if under(pkg, dir) {
			return true
		}
	}
	switch pkg {
	case "agent", "engine", "trainer", "batch", "checkpoint", "moe", "chattemplate", "trial":
		return true
	}
	return false
}

// stageOf names the stage a package under stages/ belongs to.
func stageOf(pkg string) string {
	parts := strings.SplitN(pkg, "/", 3)
	if len(parts) < 2 {
		return pkg
	}
	return parts[1]
}

// The t1 command parses its command line and prints what the packages it
// calls return; work that creeps into it is out of reach of their tests.
func TestCommandStaysThin(t *testing.T) {
	const limit = 1000
	files, err := filepath.Glob("../cmd/t1/*.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(data, []byte("\n"))
	}
	if lines == 0 || lines > limit {
		t.Errorf("cmd/t1 has %d lines of non-test code, want at most %d: move the work to a package", lines, limit)
	}
}
