package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/local"
)

type eventsFlags struct {
	run, typ string
	fromSeq  uint64
	limit    int
}

func (f *eventsFlags) bind(c *cobra.Command) {
	c.Flags().StringVar(&f.run, "run", "", "only this run (default: every run)")
	c.Flags().StringVar(&f.typ, "type", "", "only this event type, e.g. task.audited (default: every type)")
	c.Flags().Uint64Var(&f.fromSeq, "from-seq", 0, "start at this stream sequence")
}

// errLimit ends a listing at --limit.
var errLimit = errors.New("limit")

func eventsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "events", Short: "List or follow events in the log"}
	write := func(cmd *cobra.Command) func(engine.Event) error {
		return func(ev engine.Event) error { return engine.WriteEvent(cmd.OutOrStdout(), ev, g.json) }
	}
	var lf eventsFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "Print matching events from the log",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{NoStore: true}, false, func(in *local.Infra) error {
				n, each := 0, write(cmd)
				err := in.Log.Replay(cmd.Context(), []string{engine.Filter(lf.run, lf.typ)}, engine.ReplayFrom{Seq: lf.fromSeq}, func(ev engine.Event) error {
					if lf.limit > 0 && n >= lf.limit {
						return errLimit
					}
					n++
					return each(ev)
				})
				if err == errLimit {
					return nil
				}
				return err
			})
		},
	}
	lf.bind(list)
	list.Flags().IntVar(&lf.limit, "limit", 0, "print at most this many (0: all)")

	var tf eventsFlags
	tail := &cobra.Command{
		Use:   "tail",
		Short: "Print new matching events as they arrive, until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.infra(cmd, local.Options{NoStore: true}, false, func(in *local.Infra) error {
				from := engine.ReplayFrom{Seq: tf.fromSeq}
				if from.Seq == 0 {
					info, err := in.Log.Stream().Info(cmd.Context())
					if err != nil {
						return err
					}
					from.Seq = info.State.LastSeq + 1
				}
				return in.Log.Follow(cmd.Context(), []string{engine.Filter(tf.run, tf.typ)}, from, write(cmd))
			})
		},
	}
	tf.bind(tail)
	cmd.AddCommand(list, tail)
	return cmd
}
