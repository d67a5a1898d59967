package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
)

// tasksCmd is the parent of every command that works on Harbor task
// directories and bundles.
func tasksCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "tasks", Short: "Work with Harbor / Terminal-Bench task directories"}
	cmd.AddCommand(tasksValidateCmd(g), tasksCheckCmd(g), tasksImportCmd(g), tasksExportCmd(g))
	return cmd
}

// taskCheck is one line of `t1 tasks validate`.
type taskCheck struct {
	Dir           string `json:"dir"`
	OK            bool   `json:"ok"`
	ID            string `json:"id,omitempty"`
	Name          string `json:"name,omitempty"`
	Category      string `json:"category,omitempty"`
	Difficulty    string `json:"difficulty,omitempty"`
	Environment   string `json:"environment,omitempty"`
	TestFiles     int    `json:"test_files"`
	TestFunctions int    `json:"test_functions"`
	NeedsOffline  bool   `json:"needs_offline"`
	Error         string `json:"error,omitempty"`
}

func tasksValidateCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate DIR...",
		Short: "Load and check task directories; exit non-zero if any is invalid",
		Long: `Loads each DIR as a Harbor task (instruction.md, task.toml, environment/,
solution/solve.sh, tests/test.sh) and prints its id, category, difficulty,
environment kind, test files and test functions, or the error naming the
file and field. A DIR without task.toml whose subdirectories hold tasks
(a dataset root) is expanded to those subdirectories.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var checks []taskCheck
			for _, dir := range expandTaskDirs(args) {
				checks = append(checks, checkTask(dir))
			}
			bad := 0
			for _, c := range checks {
				if !c.OK {
					bad++
				}
			}
			if g.json {
				if err := printJSON(cmd, checks); err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "STATUS\tID\tCATEGORY\tDIFFICULTY\tENV\tTEST FILES\tTESTS\tDIR")
				for _, c := range checks {
					if !c.OK {
						continue
					}
					net := ""
					if c.NeedsOffline {
						net = " (fetches at verify time)"
					}
					fmt.Fprintf(tw, "ok\t%s\t%s\t%s\t%s\t%d\t%d\t%s%s\n", c.ID, dash(c.Category), dash(c.Difficulty), c.Environment, c.TestFiles, c.TestFunctions, c.Dir, net)
				}
				tw.Flush()
				for _, c := range checks {
					if !c.OK {
						fmt.Fprintf(cmd.OutOrStdout(), "INVALID %s\n", c.Error)
					}
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d tasks are invalid", bad, len(checks))
			}
			return nil
		},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// expandTaskDirs replaces a dataset root (no task.toml, subdirectories
// with one) by its task subdirectories, sorted.
func expandTaskDirs(args []string) []string {
	var out []string
	for _, a := range args {
		if _, err := os.Stat(filepath.Join(a, harbor.ConfigFile)); err == nil {
			out = append(out, a)
			continue
		}
		ents, err := os.ReadDir(a)
		var subs []string
		if err == nil {
			for _, e := range ents {
				if _, err := os.Stat(filepath.Join(a, e.Name(), harbor.ConfigFile)); e.IsDir() && err == nil {
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

func checkTask(dir string) taskCheck {
	c := taskCheck{Dir: dir}
	t, err := harbor.Load(dir)
	if err == nil {
		c.ID, err = t.ID()
	}
	if err != nil {
		c.Error = err.Error()
		return c
	}
	c.OK, c.Name = true, t.Name
	c.Category, c.Difficulty = t.Config.Metadata.Category, t.Config.Metadata.Difficulty
	c.Environment = t.EnvironmentKind()
	c.TestFiles, c.TestFunctions = len(t.TestFiles()), t.CountTestFunctions()
	c.NeedsOffline, _ = verifier.NeedsOffline(t)
	return c
}
