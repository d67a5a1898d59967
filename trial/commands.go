package trial

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/store"
)

// Help texts of the `t1 tasks` commands.
const (
	ValidateHelp = `Loads each DIR as a Harbor task (instruction.md, task.toml, environment/,
solution/solve.sh, tests/test.sh) and prints its id, category, difficulty,
environment kind, test files and test functions, or the error naming the
file and field. A DIR without task.toml whose subdirectories hold tasks
(a dataset root) is expanded to those subdirectories.`
	CheckHelp = `For each task: a fresh sandbox with the task's environment, solution/solve.sh, then the
verifier (tests/test.sh; when it would fetch tools from the network, with stand-ins for
curl | sh of uv's installer, uv, uvx, pip and apt-get that succeed when the sandbox has
what they ask for). Prints every assertion's result and the reward (passed assertions ×
--scale), and the end of the solution's output when it fails. With --no-op (the default)
the verifier also judges the untouched environment and warns of every test that passes
there: such a test checks nothing the task does, or finds what the host's system
directories provide. Exits non-zero unless every task is solved.`
	ImportHelp = `Loads each DIR (a dataset root is expanded to its task subdirectories), stores its
deterministic bundle at runs/<run>/bundles/<task>.tar.gz and a tasks-table row
(source "import"). Importing the same task again changes nothing.`
)

// ValidateAll validates every task of args (dataset roots expanded); the
// error counts the invalid ones.
func ValidateAll(args []string) ([]Validation, error) {
	var checks []Validation
	bad := 0
	for _, dir := range harbor.ExpandDirs(args) {
		if checks = append(checks, Validate(dir)); !checks[len(checks)-1].OK {
			bad++
		}
	}
	if bad > 0 {
		return checks, fmt.Errorf("%d of %d tasks are invalid", bad, len(checks))
	}
	return checks, nil
}

// WriteValidations prints the valid tasks as a table, then each invalid
// one's error.
func WriteValidations(out io.Writer, checks []Validation) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tID\tCATEGORY\tDIFFICULTY\tENV\tTEST FILES\tTESTS\tDIR")
	for _, c := range checks {
		if c.OK {
			net := ""
			if c.NeedsOffline {
				net = " (fetches at verify time)"
			}
			fmt.Fprintf(tw, "ok\t%s\t%s\t%s\t%s\t%d\t%d\t%s%s\n", c.ID, dash(c.Category), dash(c.Difficulty), c.Environment, c.TestFiles, c.TestFunctions, c.Dir, net)
		}
	}
	tw.Flush()
	for _, c := range checks {
		if !c.OK {
			fmt.Fprintf(out, "INVALID %s\n", c.Error)
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// CheckAll checks every task of args (dataset roots expanded); the error
// counts those their reference solution did not solve.
func CheckAll(ctx context.Context, args []string, opt Options, rf verifier.RewardFunc, noOp bool) ([]CheckResult, error) {
	var results []CheckResult
	failed := 0
	for _, dir := range harbor.ExpandDirs(args) {
		if results = append(results, Check(ctx, dir, opt, rf, noOp)); !results[len(results)-1].Solved {
			failed++
		}
	}
	if failed > 0 {
		return results, fmt.Errorf("%d of %d tasks not solved by their reference solution", failed, len(results))
	}
	return results, nil
}

// AbsDirs expands args to their task directories as absolute paths, which
// stay right when the working directory moves (the embedded S3 gateway
// moves it).
func AbsDirs(args []string) ([]string, error) {
	var dirs []string
	for _, d := range harbor.ExpandDirs(args) {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, abs)
	}
	return dirs, nil
}

// ImportAll imports every directory into run; the error counts those
// that failed.
func ImportAll(ctx context.Context, st store.ObjectStore, run string, dirs []string) ([]Imported, error) {
	var results []Imported
	bad := 0
	for _, dir := range dirs {
		if results = append(results, Import(ctx, st, run, dir)); results[len(results)-1].Error != "" {
			bad++
		}
	}
	if bad > 0 {
		return results, fmt.Errorf("%d of %d tasks not imported", bad, len(results))
	}
	return results, nil
}

// WriteImports prints one line per directory: its task and bundle, or
// its error.
func WriteImports(w io.Writer, results []Imported) {
	for _, r := range results {
		if r.Error != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Dir, r.Error)
		} else {
			fmt.Fprintf(w, "%s: %s → %s\n", r.Dir, r.Task, r.Bundle)
		}
	}
}

// Export writes the run's tasks of the given ids (none: every bundle of
// the run) as task directories under out, calling wrote after each.
func Export(ctx context.Context, st store.ObjectStore, run string, ids []string, out string, wrote func(dir string)) error {
	if len(ids) == 0 {
		for o, err := range st.List(ctx, keys.Bundles(run)) {
			if err != nil {
				return err
			}
			if id, ok := keys.BundleTask(run, o.Key); ok {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("run %s has no task bundles", run)
	}
	for _, id := range ids {
		dir := filepath.Join(out, id)
		if _, err := FetchBundle(ctx, st, keys.Bundle(run, id), "", dir); err != nil {
			return err
		}
		wrote(dir)
	}
	return nil
}
