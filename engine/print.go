package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/t1pipe/t1/jsonout"
)

// Filter is the log's subject filter for the events of run of type typ;
// empty matches every run or every type.
func Filter(run, typ string) string {
	return "t1." + cmp.Or(run, "*") + "." + cmp.Or(typ, ">")
}

// WriteEvent prints ev as one line: JSON with its stream sequence, or a
// column view whose payload is cut to fit a terminal.
func WriteEvent(w io.Writer, ev Event, asJSON bool) error {
	if asJSON {
		return jsonout.Line(w, struct {
			Seq uint64 `json:"seq"`
			Event
		}{ev.Seq, ev})
	}
	payload := string(ev.Payload)
	if len(payload) > 160 {
		payload = payload[:160] + "…"
	}
	_, err := fmt.Fprintf(w, "%6d  %s  %-6s %-24s %s  %s\n", ev.Seq, ev.Time.Format("2006-01-02T15:04:05.000Z07:00"), ev.Run, ev.Type, ev.ID[:12], payload)
	return err
}

// WriteText prints the status as tables, under the NATS server's URL.
func (st Status) WriteText(out io.Writer, nats string) {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "NATS %s\n\n", nats)
	fmt.Fprintln(w, "STREAM\tMESSAGES\tBYTES\tFIRST\tLAST")
	for _, s := range st.Streams {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", s.Name, s.Messages, s.Bytes, s.FirstSeq, s.LastSeq)
	}
	fmt.Fprintln(w, "\nCONSUMER\tPENDING\tACK PENDING\tREDELIVERED\tDELIVERED SEQ")
	for _, c := range st.Consumers {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", c.Name, c.Pending, c.AckPending, c.Redelivered, c.Delivered)
	}
	if len(st.Consumers) == 0 {
		fmt.Fprintln(w, "(none)")
	}
	for _, t := range []struct {
		head string
		rows []EventCount
	}{{"DEAD LETTERS\tTYPE\tCOUNT", st.DeadLetters}, {"FAILED\tTYPE\tCOUNT", st.Failed}, {"RUN\tTYPE\tEVENTS", st.Events}} {
		fmt.Fprintln(w, "\n"+t.head)
		for _, e := range t.rows {
			fmt.Fprintf(w, "%s\t%s\t%d\n", e.Run, e.Type, e.Count)
		}
		if len(t.rows) == 0 {
			fmt.Fprintln(w, "(none)")
		}
	}
	w.Flush()
}

// errLimit ends a listing at its limit.
var errLimit = errors.New("limit")

// List calls fn for the events matching filter from stream sequence
// fromSeq on (0: the start), at most limit of them (0: every one).
func (l *Log) List(ctx context.Context, filter string, fromSeq uint64, limit int, fn func(Event) error) error {
	n := 0
	err := l.Replay(ctx, []string{filter}, ReplayFrom{Seq: fromSeq}, func(ev Event) error {
		if limit > 0 && n >= limit {
			return errLimit
		}
		n++
		return fn(ev)
	})
	if err == errLimit {
		return nil
	}
	return err
}

// Tail follows the events matching filter from stream sequence fromSeq
// on; from 0, those published from now on.
func (l *Log) Tail(ctx context.Context, filter string, fromSeq uint64, fn func(Event) error) error {
	if fromSeq == 0 {
		info, err := l.stream.Info(ctx)
		if err != nil {
			return err
		}
		fromSeq = info.State.LastSeq + 1
	}
	return l.Follow(ctx, []string{filter}, ReplayFrom{Seq: fromSeq}, fn)
}
