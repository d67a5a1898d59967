package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/local"
)

type eventsFlags struct {
	run, typ string
	fromSeq  uint64
	limit    int
}

func (f *eventsFlags) filter() string {
	run, typ := f.run, f.typ
	if run == "" {
		run = "*"
	}
	if typ == "" {
		typ = ">"
	}
	return "t1." + run + "." + typ
}

func eventsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "List or follow events in the log"}
	add := func(c *cobra.Command, f *eventsFlags) {
		c.Flags().StringVar(&f.run, "run", "", "only this run (default: every run)")
		c.Flags().StringVar(&f.typ, "type", "", "only this event type, e.g. task.audited (default: every type)")
		c.Flags().Uint64Var(&f.fromSeq, "from-seq", 0, "start at this stream sequence")
	}
	var lf eventsFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "Print matching events from the log",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, closeFn, err := openLog(cmd, g)
			if err != nil {
				return err
			}
			defer closeFn()
			n := 0
			stop := fmt.Errorf("limit")
			err = l.Replay(cmd.Context(), []string{lf.filter()}, engine.ReplayFrom{Seq: lf.fromSeq}, func(ev engine.Event) error {
				if lf.limit > 0 && n >= lf.limit {
					return stop
				}
				n++
				return printEvent(cmd, g, ev)
			})
			if err == stop {
				return nil
			}
			return err
		},
	}
	add(list, &lf)
	list.Flags().IntVar(&lf.limit, "limit", 0, "print at most this many (0: all)")

	var tf eventsFlags
	tail := &cobra.Command{
		Use:   "tail",
		Short: "Print new matching events as they arrive, until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, closeFn, err := openLog(cmd, g)
			if err != nil {
				return err
			}
			defer closeFn()
			from := engine.ReplayFrom{Seq: tf.fromSeq}
			if from.Seq == 0 {
				info, err := l.Stream().Info(cmd.Context())
				if err != nil {
					return err
				}
				from.Seq = info.State.LastSeq + 1
			}
			return l.Follow(cmd.Context(), []string{tf.filter()}, from, func(ev engine.Event) error {
				return printEvent(cmd, g, ev)
			})
		},
	}
	add(tail, &tf)
	cmd.AddCommand(list, tail)
	return cmd
}

func openLog(cmd *cobra.Command, g *globals) (*engine.Log, func(), error) {
	cfg, err := g.load()
	if err != nil {
		return nil, nil, err
	}
	in, err := local.Open(cmd.Context(), cfg, local.Options{NoStore: true})
	if err != nil {
		return nil, nil, err
	}
	return in.Log, in.Close, nil
}

func printEvent(cmd *cobra.Command, g *globals, ev engine.Event) error {
	out := cmd.OutOrStdout()
	if g.json {
		line, err := json.Marshal(struct {
			Seq uint64 `json:"seq"`
			engine.Event
		}{ev.Seq, ev})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(line))
		return err
	}
	payload := string(ev.Payload)
	if len(payload) > 160 {
		payload = payload[:160] + "…"
	}
	_, err := fmt.Fprintf(out, "%6d  %s  %-6s %-24s %s  %s\n", ev.Seq, ev.Time.Format("2006-01-02T15:04:05.000Z07:00"), ev.Run, ev.Type, ev.ID[:12], payload)
	return err
}
