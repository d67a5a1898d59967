package image

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/t1pipe/t1/infra/sandbox"
)

// verifierTools are what the offline stand-ins of an image's verifier
// run on: the interpreter and pytest that uvx, pip or apt-get would have
// installed at verify time.
var verifierTools = []string{"python3", "python3-pytest"}

// debianName is a Debian package name (Debian Policy 5.6.1).
var debianName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// Verifier returns res with one more layer, for the task's verifier when
// it runs offline: what test.sh would fetch at verify time and Debian
// provides, installed from the mirror (python3, pytest, and every package
// test.sh's apt-get or apt install names). The solution's and agent's
// sandboxes never see it; the verifier's sees nothing of the host's.
func Verifier(ctx context.Context, taskDir string, res *Result, opt Options) (*Result, error) {
	opt, err := defaults(opt)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(taskDir, "tests", "test.sh")
	var pkgs []string
	if data, err := os.ReadFile(file); err == nil {
		if pkgs, err = TestPackages(data); err != nil {
			return nil, fmt.Errorf("image: %s: %w", file, err)
		}
	}
	for _, p := range verifierTools {
		if !slices.Contains(pkgs, p) {
			pkgs = append(pkgs, p)
		}
	}
	slices.Sort(pkgs)
	c, err := openCache(opt.CacheDir)
	if err != nil {
		return nil, err
	}
	defer c.close()
	if len(res.Keys) == 0 {
		return nil, fmt.Errorf("image: %s: no layers to verify on", taskDir)
	}
	b := &builder{opt: opt, cache: c, file: file, vars: map[string]string{}, workdir: "/",
		layers: slices.Clone(res.Image.Layers), keys: slices.Clone(res.Keys), key: res.Keys[len(res.Keys)-1], envList: res.Image.Env}
	b.res = Result{Steps: slices.Clone(res.Steps), Mapping: res.Mapping}
	s := "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends " + strings.Join(pkgs, " ") + " && apt-get clean"
	if err := b.runStep(ctx, sandbox.Instruction{Cmd: "RUN", Raw: s}, "RUN "+s, []string{"/bin/sh", "-c", s}); err != nil {
		return nil, fmt.Errorf("image: the verifier's layer: %w", err)
	}
	img := *res.Image
	img.Layers = b.layers
	img.Notes = append(slices.Clone(res.Image.Notes), "verifier: "+strings.Join(pkgs, " ")+" installed from the mirror on top of the image, as test.sh's installers would fetch them at verify time")
	out := b.res
	out.Image, out.Keys = &img, b.keys
	for _, s := range out.Steps {
		out.Size += s.Size
	}
	return &out, nil
}

// TestPackages lists the Debian packages a test script installs with
// apt-get or apt install: literal words only (a package named by a
// variable is not known before the script runs), versions (=1.2) and
// releases (/bookworm) dropped. A script that does not parse is an error.
func TestPackages(script []byte) ([]string, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(string(script)), "test.sh")
	if err != nil {
		return nil, err
	}
	var out []string
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		words := make([]string, len(call.Args))
		for i, w := range call.Args {
			words[i] = w.Lit()
		}
		for _, p := range aptInstalls(words) {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		return true
	})
	return out, nil
}

// aptInstalls is the packages one simple command installs with apt-get
// or apt, past sudo, env and their assignments.
func aptInstalls(words []string) []string {
	i := 0
	for i < len(words) && (words[i] == "sudo" || words[i] == "env" || strings.Contains(words[i], "=") || strings.HasPrefix(words[i], "-")) {
		i++
	}
	if i >= len(words) || (path.Base(words[i]) != "apt-get" && path.Base(words[i]) != "apt") {
		return nil
	}
	var pkgs []string
	sub := ""
	for j := i + 1; j < len(words); j++ {
		w := words[j]
		switch {
		case w == "-o" || w == "-t" || w == "-c" || w == "--option" || w == "--target-release" || w == "--config-file":
			j++
		case strings.HasPrefix(w, "-"):
		case sub == "":
			sub = w
		case sub == "install" || sub == "reinstall":
			w, _, _ = strings.Cut(w, "=")
			w, _, _ = strings.Cut(w, "/")
			if debianName.MatchString(w) {
				pkgs = append(pkgs, w)
			}
		}
	}
	return pkgs
}
