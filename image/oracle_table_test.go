package image_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/image"
	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/trial"
)

var (
	oracleTable     = flag.Bool("oracle-table", false, "run TestOracleTable: every Terminal-Bench-shaped task's oracle, printed as a table")
	oracleTableDirs = flag.String("oracle-table-dirs", "", "colon-separated directories of task directories for TestOracleTable (default: every trial/testdata/*)")
)

// TestOracleTable runs the reference solution of every task directory in
// the Terminal-Bench-shaped test data (trial/testdata/*/*: a directory
// with a task.toml, whatever group it is in; or the task directories in
// the directories -oracle-table-dirs names) as `t1 tasks check` does, three
// ways: on the host's system directories without network, on the image
// built from the task's Dockerfile without network, and on that image
// with network registries. It prints a Markdown table: each way's
// pass/fail, why each failure failed, and the hosts the registries proxy
// refused (what a failure for want of the network needed). It fails
// nothing: it measures.
//
//	sudo go test ./image/ -run TestOracleTable -oracle-table -v -timeout 60m
func TestOracleTable(t *testing.T) {
	if !*oracleTable {
		t.Skip("a measurement: run with -oracle-table")
	}
	cache, base := image.MachineCache(t)
	dirs := tableDirs(t)
	bw, err := sandbox.ByName("bwrap", false)
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := image.DefaultRegistries("")
	if err != nil {
		t.Fatal(err)
	}
	img := &image.Backend{Inner: bw, Options: image.Options{CacheDir: cache, Base: base, Registries: hosts}}
	ways := []struct {
		name string
		opt  trial.Options
	}{
		{"host, none", trial.Options{Backend: bw}},
		{"image, none", trial.Options{Backend: img}},
		{"image, registries", trial.Options{Backend: img, Registries: hosts}},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| task | %s | why it failed | hosts refused (registries) |\n|---|", strings.Join(func() []string {
		var n []string
		for _, w := range ways {
			n = append(n, w.name)
		}
		return n
	}(), " | "))
	b.WriteString(strings.Repeat("---|", len(ways)+2) + "\n")
	ctx := context.Background()
	for _, dir := range dirs {
		task, err := harbor.Load(dir)
		if err != nil {
			fmt.Fprintf(&b, "| %s | %s | does not load: %s | |\n", filepath.Base(dir), strings.Repeat("– | ", len(ways)-1)+"–", oneLine(err.Error()))
			continue
		}
		var cells, why []string
		var refused []string
		for _, w := range ways {
			start := time.Now()
			out, err := trial.Run(ctx, dir, task, trial.Oracle(dir), w.opt)
			pass, reason := verdict(out, err)
			reason = strings.ReplaceAll(reason, dir+"/", "")
			t.Logf("%s, %s: %v in %s: %s", filepath.Base(dir), w.name, pass, time.Since(start).Round(time.Second), reason)
			cells = append(cells, map[bool]string{true: "pass", false: "**fail**"}[pass])
			if !pass {
				why = append(why, w.name+": "+reason)
			}
			for _, h := range refusedBy(out, err) {
				if !slices.Contains(refused, h) {
					refused = append(refused, h)
				}
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", filepath.Base(dir), strings.Join(cells, " | "), strings.Join(why, "; "), strings.Join(refused, ", "))
	}
	fmt.Fprintf(&b, "\nregistries allow-list: %s; CA bundle: %q\n", strings.Join(hosts, ", "), egress.CABundle())
	fmt.Print(b.String())
}

// testdata is taken before TestMain changes directory.
var testdata = abs("../trial/testdata")

// tableDirs are the task directories the table covers, sorted.
func tableDirs(t *testing.T) []string {
	var parents []string
	if *oracleTableDirs != "" {
		parents = strings.Split(*oracleTableDirs, ":")
	} else {
		m, err := filepath.Glob(filepath.Join(testdata, "*"))
		if err != nil {
			t.Fatal(err)
		}
		parents = m
	}
	var dirs []string
	for _, p := range parents {
		m, err := filepath.Glob(filepath.Join(p, "*", "task.toml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			dirs = append(dirs, filepath.Dir(f))
		}
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Compare(filepath.Base(a), filepath.Base(b)) })
	if len(dirs) == 0 {
		t.Fatalf("no task directories under %v", parents)
	}
	return dirs
}

// verdict says whether the oracle passed and, if not, why in one line.
func verdict(out trial.Outcome, err error) (bool, string) {
	switch {
	case err != nil:
		return false, oneLine(err.Error())
	case out.Report == nil:
		return false, "no verifier report"
	case out.SolutionTimedOut:
		return false, "the solution timed out"
	case out.Report.Solved:
		return true, ""
	}
	var why []string
	if out.SolutionExit != 0 {
		why = append(why, fmt.Sprintf("solution exit %d: %s", out.SolutionExit, lastLine(out.SolutionOutput)))
	}
	why = append(why, fmt.Sprintf("%d/%d tests passed", out.Report.Passed, out.Report.Total))
	if len(out.Report.Problems) > 0 {
		why = append(why, oneLine(out.Report.Problems[0]))
	}
	return false, strings.Join(why, ", ")
}

// refusedBy lists the hosts the proxy refused the attempt (its solution,
// from the outcome's log) or the build (from its error).
func refusedBy(out trial.Outcome, err error) []string {
	var hs []string
	for _, q := range out.Egress {
		if !q.Allowed {
			hs = append(hs, net.JoinHostPort(q.Host, strconv.Itoa(q.Port)))
		}
	}
	if err != nil {
		if _, rest, ok := strings.Cut(err.Error(), "the registries proxy refused "); ok {
			list, _, _ := strings.Cut(rest, ": the build")
			for _, h := range strings.Split(list, ", ") {
				hs = append(hs, strings.TrimSpace(h)+" (build)")
			}
		}
	}
	return hs
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return oneLine(lines[len(lines)-1])
}

// oneLine keeps a reason's head and its tail, where a build's error
// says why.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "|", "/")), " ")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:100]) + " … " + string(r[len(r)-190:])
	}
	return s
}
