package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/local"
)

type streamStatus struct {
	Name     string `json:"name"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

type consumerStatus struct {
	Name        string `json:"name"`
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ack_pending"`
	Redelivered int    `json:"redelivered"`
	Delivered   uint64 `json:"delivered_seq"`
}

type eventCount struct {
	Run   string `json:"run"`
	Type  string `json:"type"`
	Count uint64 `json:"count"`
}

type statusReport struct {
	NATS        string           `json:"nats"`
	Streams     []streamStatus   `json:"streams"`
	Consumers   []consumerStatus `json:"consumers"`
	DeadLetters []eventCount     `json:"dead_letters"`
	// Failed counts <type>.failed events per run by the type that failed.
	Failed []eventCount `json:"failed"`
	Events []eventCount `json:"events"`
}

func statusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show streams, stage consumers, dead letters and event counts per run and type",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := g.open(cmd.Context(), local.Options{NoStore: true})
			if err != nil {
				return err
			}
			defer in.Close()
			rep, err := collectStatus(cmd.Context(), in.Log)
			if err != nil {
				return err
			}
			rep.NATS = in.Endpoints.NATS
			if g.json {
				return printJSON(cmd, rep)
			}
			printStatus(cmd, rep)
			return nil
		},
	}
}

func collectStatus(ctx context.Context, l *engine.Log) (statusReport, error) {
	var rep statusReport
	for _, s := range []jetstream.Stream{l.Stream(), l.DeadLetters()} {
		info, err := s.Info(ctx)
		if err != nil {
			return rep, fmt.Errorf("stream info: %w", err)
		}
		rep.Streams = append(rep.Streams, streamStatus{
			Name: info.Config.Name, Messages: info.State.Msgs, Bytes: info.State.Bytes,
			FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq,
		})
	}
	events, err := l.EventCounts(ctx, "")
	if err != nil {
		return rep, err
	}
	dead, err := l.DeadLetterCounts(ctx, "")
	if err != nil {
		return rep, err
	}
	rep.Events = countRows(events)
	rep.Failed = failedCounts(rep.Events)
	rep.DeadLetters = countRows(dead)
	lister := l.Stream().ListConsumers(ctx)
	for info := range lister.Info() {
		rep.Consumers = append(rep.Consumers, consumerStatus{
			Name: info.Name, Pending: info.NumPending, AckPending: info.NumAckPending,
			Redelivered: info.NumRedelivered, Delivered: info.Delivered.Stream,
		})
	}
	if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		return rep, fmt.Errorf("consumers: %w", err)
	}
	sort.Slice(rep.Consumers, func(i, j int) bool { return rep.Consumers[i].Name < rep.Consumers[j].Name })
	return rep, nil
}

// countRows turns counts into rows sorted by run and type.
func countRows(c engine.Counts) []eventCount {
	var out []eventCount
	for run, types := range c {
		for typ, n := range types {
			out = append(out, eventCount{Run: run, Type: typ, Count: n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Run != out[j].Run {
			return out[i].Run < out[j].Run
		}
		return out[i].Type < out[j].Type
	})
	return out
}

// failedCounts picks the <type>.failed rows out of counts, keyed by the
// type that failed.
func failedCounts(counts []eventCount) []eventCount {
	var out []eventCount
	for _, c := range counts {
		if typ, ok := strings.CutSuffix(c.Type, engine.FailedType("")); ok {
			out = append(out, eventCount{Run: c.Run, Type: typ, Count: c.Count})
		}
	}
	return out
}

func printStatus(cmd *cobra.Command, rep statusReport) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "NATS %s\n\n", rep.NATS)
	fmt.Fprintln(w, "STREAM\tMESSAGES\tBYTES\tFIRST\tLAST")
	for _, s := range rep.Streams {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", s.Name, s.Messages, s.Bytes, s.FirstSeq, s.LastSeq)
	}
	fmt.Fprintln(w, "\nCONSUMER\tPENDING\tACK PENDING\tREDELIVERED\tDELIVERED SEQ")
	for _, c := range rep.Consumers {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", c.Name, c.Pending, c.AckPending, c.Redelivered, c.Delivered)
	}
	if len(rep.Consumers) == 0 {
		fmt.Fprintln(w, "(none)")
	}
	fmt.Fprintln(w, "\nDEAD LETTERS\tTYPE\tCOUNT")
	for _, e := range rep.DeadLetters {
		fmt.Fprintf(w, "%s\t%s\t%d\n", e.Run, e.Type, e.Count)
	}
	if len(rep.DeadLetters) == 0 {
		fmt.Fprintln(w, "(none)")
	}
	fmt.Fprintln(w, "\nFAILED\tTYPE\tCOUNT")
	for _, e := range rep.Failed {
		fmt.Fprintf(w, "%s\t%s\t%d\n", e.Run, e.Type, e.Count)
	}
	if len(rep.Failed) == 0 {
		fmt.Fprintln(w, "(none)")
	}
	fmt.Fprintln(w, "\nRUN\tTYPE\tEVENTS")
	for _, e := range rep.Events {
		fmt.Fprintf(w, "%s\t%s\t%d\n", e.Run, e.Type, e.Count)
	}
	if len(rep.Events) == 0 {
		fmt.Fprintln(w, "(none)")
	}
	w.Flush()
}
