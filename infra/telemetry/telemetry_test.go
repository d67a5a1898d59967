package telemetry

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Setup replaces process-wide otel globals, so none of these tests run in
// parallel.

func setup(t *testing.T, cfg Config) *Providers {
	t.Helper()
	p, err := Setup(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

func shutdown(t *testing.T, p *Providers) {
	t.Helper()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// exported is the part of a stdouttrace line the tests look at.
type exported struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func spans(t *testing.T, path string) map[string]exported {
	t.Helper()
	out := map[string]exported{}
	for _, line := range readLines(t, path) {
		var s exported
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("line is not JSON: %v\n%s", err, line)
		}
		if s.Name != "" {
			out[s.Name] = s
		}
	}
	return out
}

func TestFileExporterWritesSpansAndMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "telemetry.jsonl")
	p := setup(t, Config{Traces: File, Metrics: File, File: path})

	ctx, span := otel.Tracer("test").Start(context.Background(), "stage.handle")
	sc := span.SpanContext()
	span.End()
	counter, err := otel.Meter("test").Int64Counter("events.handled")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(ctx, 3)
	shutdown(t, p)

	got, ok := spans(t, path)["stage.handle"]
	if !ok {
		t.Fatalf("span not in %s:\n%s", path, strings.Join(readLines(t, path), "\n"))
	}
	if got.SpanContext.TraceID != sc.TraceID().String() || got.SpanContext.SpanID != sc.SpanID().String() {
		t.Errorf("exported span context %+v, want trace %s span %s", got.SpanContext, sc.TraceID(), sc.SpanID())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"events.handled"`) {
		t.Errorf("metric events.handled not exported:\n%s", data)
	}
}

// Setup installs the W3C trace context and baggage propagator: what one
// process injects into a carrier (the engine's event headers), another
// extracts as the parent of its spans.
func TestPropagatorRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traces.jsonl")
	p := setup(t, Config{Traces: File, File: path})
	tracer := otel.Tracer("test")

	member, err := baggage.NewMember("run", "demo")
	if err != nil {
		t.Fatal(err)
	}
	bag, err := baggage.New(member)
	if err != nil {
		t.Fatal(err)
	}
	ctx, pub := tracer.Start(baggage.ContextWithBaggage(context.Background(), bag), "publish")
	h := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, h)
	if h.Get("traceparent") == "" {
		t.Fatalf("no traceparent after Inject: %v", h)
	}

	// The consumer side starts from a fresh context, as a handler would.
	got := otel.GetTextMapPropagator().Extract(context.Background(), h)
	remote := trace.SpanContextFromContext(got)
	want := pub.SpanContext()
	if remote.TraceID() != want.TraceID() || remote.SpanID() != want.SpanID() {
		t.Errorf("extracted trace %s span %s, want trace %s span %s",
			remote.TraceID(), remote.SpanID(), want.TraceID(), want.SpanID())
	}
	if !remote.IsRemote() || !remote.IsSampled() {
		t.Errorf("extracted span context remote=%v sampled=%v, want both", remote.IsRemote(), remote.IsSampled())
	}
	if v := baggage.FromContext(got).Member("run").Value(); v != "demo" {
		t.Errorf("baggage run = %q, want demo", v)
	}

	_, handle := tracer.Start(got, "handle")
	handle.End()
	pub.End()
	shutdown(t, p)

	child := spans(t, path)["handle"]
	if child.SpanContext.TraceID != want.TraceID().String() || child.Parent.SpanID != want.SpanID().String() {
		t.Errorf("handle span trace %s parent %s, want trace %s parent %s",
			child.SpanContext.TraceID, child.Parent.SpanID, want.TraceID(), want.SpanID())
	}
}

func TestOffWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "telemetry.jsonl")
	stdout := captureStdout(t)
	p := setup(t, Config{File: path})

	// Trace context arriving from upstream still passes through.
	in := propagation.MapCarrier{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	ctx, span := otel.Tracer("test").Start(otel.GetTextMapPropagator().Extract(context.Background(), in), "handle")
	span.End()
	counter, err := otel.Meter("test").Int64Counter("events.handled")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(ctx, 1)
	out := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, out)
	shutdown(t, p)

	if got := out.Get("traceparent"); got != in.Get("traceparent") {
		t.Errorf("traceparent passed through as %q, want %q", got, in.Get("traceparent"))
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("telemetry file exists with exporters off (stat: %v)", err)
	}
	if s := stdout(); s != "" {
		t.Errorf("wrote to stdout with exporters off: %q", s)
	}
}

// captureStdout redirects os.Stdout until the returned function is called,
// which restores it and returns what was written.
func captureStdout(t *testing.T) func() string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	orig := os.Stdout
	os.Stdout = w
	var buf strings.Builder
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&buf, r); close(done) }()
	restore := sync.OnceFunc(func() {
		os.Stdout = orig
		w.Close()
		<-done
		r.Close()
	})
	t.Cleanup(restore)
	return func() string { restore(); return buf.String() }
}

func TestOTLPExportsOverHTTP(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 0 && r.Header.Get("Content-Type") == "application/x-protobuf" {
			mu.Lock()
			paths[r.URL.Path]++
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"url", Config{Traces: OTLP, Metrics: OTLP, OTLPEndpoint: srv.URL}},
		{"host:port", Config{Traces: OTLP, Metrics: OTLP, OTLPEndpoint: strings.TrimPrefix(srv.URL, "http://"), OTLPInsecure: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			clear(paths)
			mu.Unlock()
			p := setup(t, tc.cfg)
			_, span := otel.Tracer("test").Start(context.Background(), "handle")
			span.End()
			counter, err := otel.Meter("test").Int64Counter("events.handled")
			if err != nil {
				t.Fatal(err)
			}
			counter.Add(context.Background(), 1)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if paths["/v1/traces"] == 0 || paths["/v1/metrics"] == 0 {
				t.Errorf("collector received %v, want /v1/traces and /v1/metrics", paths)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // empty: valid
	}{
		{"zero value", Config{}, ""},
		{"default", DefaultConfig(), ""},
		{"all exporters", Config{Traces: OTLP, Metrics: File, File: "t.jsonl"}, ""},
		{"unknown traces", Config{Traces: "jaeger"}, `traces: unknown exporter "jaeger" (want off, stdout, file or otlp)`},
		{"unknown metrics", Config{Metrics: "Stdout"}, `metrics: unknown exporter "Stdout" (want off, stdout, file or otlp)`},
		{"file without path", Config{Traces: File}, `file: required when traces is "file"`},
		{"otlp url", Config{Traces: OTLP, OTLPEndpoint: "https://collector:4318/otlp"}, ""},
		{"otlp grpc url", Config{Traces: OTLP, OTLPEndpoint: "grpc://collector:4317"}, `otlp_endpoint: want host:port or an http(s) URL, got "grpc://collector:4317"`},
		{"negative interval", Config{MetricInterval: -time.Second}, `metric_interval: must not be negative, got -1s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Validate = %v, want %s", err, tc.want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Validate error %T is not a *FieldError", err)
			}
		})
	}
}

func TestSetupRejectsUnknownExporter(t *testing.T) {
	_, err := Setup(context.Background(), Config{Traces: "stdot"})
	if err == nil || !strings.Contains(err.Error(), `unknown exporter "stdot"`) {
		t.Fatalf("Setup = %v, want unknown exporter error", err)
	}
}
