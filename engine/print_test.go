package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestFilter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ run, typ, want string }{
		{"", "", "t1.*.>"}, {"r1", "", "t1.r1.>"}, {"", "task.audited", "t1.*.task.audited"},
	} {
		if got := Filter(c.run, c.typ); got != c.want {
			t.Errorf("Filter(%q, %q) = %q, want %q", c.run, c.typ, got, c.want)
		}
	}
}

func TestWriteEvent(t *testing.T) {
	t.Parallel()
	ev := Event{ID: "0123456789abcdef", Type: "run.started", Run: "r1", Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Payload: []byte(`{"x":"` + strings.Repeat("y", 200) + `"}`), Seq: 7}
	var text, js bytes.Buffer
	if err := WriteEvent(&text, ev, false); err != nil {
		t.Fatal(err)
	}
	if s := text.String(); !strings.HasPrefix(s, "     7  2026-01-02T03:04:05.000Z  r1     run.started              0123456789ab  {") || !strings.HasSuffix(s, "…\n") {
		t.Fatalf("text: %q", s)
	}
	if err := WriteEvent(&js, ev, true); err != nil {
		t.Fatal(err)
	}
	if s := js.String(); !strings.HasPrefix(s, `{"seq":7,"id":"0123456789abcdef"`) || strings.Count(s, "\n") != 1 {
		t.Fatalf("json: %q", s)
	}
}

func TestStatusWriteText(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	Status{Events: []EventCount{{Run: "r1", Type: "run.started", Count: 1}}}.WriteText(&b, "nats://x")
	s := b.String()
	for _, want := range []string{"NATS nats://x\n", "CONSUMER", "(none)", "r1   run.started  1"} {
		if !strings.Contains(s, want) {
			t.Fatalf("lacks %q:\n%s", want, s)
		}
	}
}

// List stops at its limit; Tail from zero delivers only what is published
// after it starts.
func TestListAndTail(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	l := ts.openLog(ts.connect())
	for i := range 3 {
		publishRoot(t, l, "r1", "demo.in", fmt.Sprint(i), item{i})
	}
	var seqs []uint64
	if err := l.List(context.Background(), Filter("r1", ""), 2, 1, func(ev Event) error { seqs = append(seqs, ev.Seq); return nil }); err != nil || len(seqs) != 1 || seqs[0] != 2 {
		t.Fatalf("list: %v %v", seqs, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		done <- l.Tail(ctx, Filter("", "demo.in"), 0, func(ev Event) error {
			var it item
			if err := ev.Decode(&it); err != nil {
				return err
			}
			got <- it.N
			cancel()
			return nil
		})
	}()
	// Published until the tail, started at some point, sees one.
	for i := 0; ; i++ {
		select {
		case n := <-got:
			if n != 7 {
				t.Fatalf("tail delivered %d, want only a new event", n)
			}
		case <-time.After(100 * time.Millisecond):
			publishRoot(t, l, "r1", "demo.in", fmt.Sprint("new", i), item{7})
			continue
		}
		break
	}
	if err := <-done; err != nil {
		t.Fatalf("tail: %v", err)
	}
}
