package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// One trace follows an event from its publisher through two stages.
func TestTraceContextCrossesStages(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	ts := startServer(t)
	l := ts.openLog(ts.connect())
	first := NewStage("first", []string{"demo.in"}, func(ctx context.Context, ev Event, out Emitter) error {
		_, err := out.Emit("demo.mid", item{1})
		return err
	})
	second := NewStage("second", []string{"demo.mid"}, func(ctx context.Context, ev Event, out Emitter) error {
		_, err := out.Emit("demo.out", item{2})
		return err
	})
	// Each runner must have its own tracer from the test provider.
	runStage(t, NewRunner(l, first, fastConfig()))
	runStage(t, NewRunner(l, second, fastConfig()))

	ctx, root := tp.Tracer("test").Start(context.Background(), "publish")
	ev, err := NewRootEvent("r1", "demo.in", "a", item{0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	root.End()
	checkFor(t, 10*time.Second, 20*time.Millisecond, countEvents(t, l, "t1.r1.demo.out", 1))
	checkFor(t, 5*time.Second, 20*time.Millisecond, func() error {
		if len(rec.Ended()) < 3 {
			return errorf("%d spans ended", len(rec.Ended()))
		}
		return nil
	})
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	s1, s2 := byName["first demo.in"], byName["second demo.mid"]
	if s1 == nil || s2 == nil {
		t.Fatalf("spans: %v", byName)
	}
	want := root.SpanContext().TraceID()
	if s1.SpanContext().TraceID() != want || s2.SpanContext().TraceID() != want {
		t.Fatalf("trace ids %s, %s; want %s", s1.SpanContext().TraceID(), s2.SpanContext().TraceID(), want)
	}
	if s1.Parent().SpanID() != root.SpanContext().SpanID() || s2.Parent().SpanID() != s1.SpanContext().SpanID() {
		t.Fatal("spans are not chained publish -> first -> second")
	}
}

func TestHeaderCarrierIgnoresCaseOnlyAsFallback(t *testing.T) {
	t.Parallel()
	c := HeaderCarrier(nats.Header{"Traceparent": {"canonical"}})
	if got := c.Get("traceparent"); got != "canonical" {
		t.Errorf("Get(traceparent) = %q, want the case-insensitive match", got)
	}
	c.Set("traceparent", "exact")
	if got := c.Get("traceparent"); got != "exact" {
		t.Errorf("Get(traceparent) = %q, want the exact match", got)
	}
	keys := c.Keys()
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"Traceparent", "traceparent"}) {
		t.Errorf("Keys() = %v", keys)
	}
}
