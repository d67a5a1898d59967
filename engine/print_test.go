package engine

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestFilter(t *testing.T) {
	for _, c := range []struct{ run, typ, want string }{
		{"", "", "t1.*.>"}, {"r1", "", "t1.r1.>"}, {"", "task.audited", "t1.*.task.audited"},
	} {
		if got := Filter(c.run, c.typ); got != c.want {
			t.Errorf("Filter(%q, %q) = %q, want %q", c.run, c.typ, got, c.want)
		}
	}
}

func TestWriteEvent(t *testing.T) {
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
	var b bytes.Buffer
	Status{Events: []EventCount{{Run: "r1", Type: "run.started", Count: 1}}}.WriteText(&b, "nats://x")
	s := b.String()
	for _, want := range []string{"NATS nats://x\n", "CONSUMER", "(none)", "r1   run.started  1"} {
		if !strings.Contains(s, want) {
			t.Fatalf("lacks %q:\n%s", want, s)
		}
	}
}
