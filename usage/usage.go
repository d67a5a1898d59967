package usage

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/jsonout"
	"github.com/t1pipe/t1/known"
)

// Groups are the headings of `t1 --help`, in order, by id.
var Groups = []cobra.Group{
	{ID: "run", Title: "Run the pipeline:"},
	{ID: "inspect", Title: "Inspect runs:"},
	{ID: "query", Title: "Query and export tables:"},
	{ID: "replay", Title: "Replay a stage into a branch:"},
	{ID: "serve", Title: "Serve infrastructure and models:"},
	{ID: "tasks", Title: "Tasks, sandboxes and single episodes:"},
}

// groupOf puts each top-level command under a heading; the rest (version,
// config, tokenizer, chat, help, completion) are cobra's Additional
// Commands.
var groupOf = map[string]string{
	"run": "run", "ablate": "run", "worker": "run", "eval": "run", "demo": "run",
	"runs": "inspect", "status": "inspect", "events": "inspect", "report": "inspect", "ui": "inspect", "digest": "inspect", "pool": "inspect", "inspect": "inspect",
	"query": "query", "export": "query",
	"replay": "replay",
	"infra":  "serve", "serve-policy": "serve", "moe": "serve",
	"tasks": "tasks", "rollout": "tasks", "sandbox": "tasks", "image": "tasks",
}

// Apply files root's commands under Groups, gives every command its
// example, and makes a mistyped command name, at the top or under a
// group, a usage error naming the closest commands.
func Apply(root *cobra.Command) {
	for _, g := range Groups {
		root.AddGroup(&g)
	}
	for _, c := range root.Commands() {
		if id, ok := groupOf[c.Name()]; ok {
			c.GroupID = id
		}
	}
	walk(root, func(c *cobra.Command) {
		if ex, ok := Examples[path(c)]; ok {
			c.Example = indent(ex)
		}
		if c.HasSubCommands() && c.RunE == nil && c.Run == nil {
			c.Args = unknownCommand
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
			// Flags of a mistyped command's intended one would otherwise
			// be reported before the command name itself.
			c.FParseErrWhitelist.UnknownFlags = true
		}
	})
}

// Missing lists the commands of root without an example.
func Missing(root *cobra.Command) []string {
	var out []string
	walk(root, func(c *cobra.Command) {
		if strings.TrimSpace(c.Example) == "" && c.Name() != "help" && !strings.HasPrefix(path(c), "completion") {
			out = append(out, "t1 "+path(c))
		}
	})
	return out
}

// unknownCommand refuses arguments to a command that only holds others:
// the first is a mistyped command name.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return known.Unknown("command", "commands of "+cmd.CommandPath(), args[0], names)
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, s := range c.Commands() {
		walk(s, fn)
	}
}

// path is a command's path without the root's name: "events list".
func path(c *cobra.Command) string {
	return strings.TrimSpace(strings.TrimPrefix(c.CommandPath(), c.Root().Name()))
}

func indent(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

// PrintError writes a command's error to w as one line: "t1: " and the
// message, or with asJSON one jsonout.Error object, so that a script
// reading --json output reads its failures the same way.
func PrintError(w io.Writer, err error, code int, asJSON bool) {
	if asJSON {
		_ = jsonout.Line(w, jsonout.Error{Error: exit.Line(err), ExitCode: code})
		return
	}
	fmt.Fprintln(w, "t1: "+exit.Line(err))
}

// WantsJSON reports whether a command line asks for JSON: the root's
// --json flag, or the argument itself where cobra stopped before it
// parsed the flags.
func WantsJSON(root *cobra.Command, args []string) bool {
	on, _ := root.PersistentFlags().GetBool("json")
	return on || slices.Contains(args, "--json") || slices.Contains(args, "--json=true")
}
