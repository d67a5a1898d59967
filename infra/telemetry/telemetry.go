package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Exporter names accepted by Config.Traces and Config.Metrics.
const (
	Off    = "off"    // no exporter; nothing is recorded or written
	Stdout = "stdout" // JSON lines on standard output
	File   = "file"   // JSON lines appended to Config.File
	OTLP   = "otlp"   // OTLP over HTTP to Config.OTLPEndpoint
)

// Config selects where traces and metrics go. The zero value is valid and
// turns both off; yaml keys are the snake_case names of the fields.
type Config struct {
	// Traces is the span exporter: "off" (also when empty), "stdout",
	// "file" or "otlp".
	Traces string `yaml:"traces"`
	// Metrics is the metric exporter, with the same choices as Traces.
	Metrics string `yaml:"metrics"`
	// File is the JSON-lines file that the "file" exporters append to.
	// Spans and metric batches share it when both use "file".
	File string `yaml:"file"`
	// OTLPEndpoint is where the "otlp" exporters send: host:port, or a base
	// URL such as http://collector:4318 to which /v1/traces and /v1/metrics
	// are appended. Empty leaves it to the OTEL_EXPORTER_OTLP_* environment
	// variables, whose own default is localhost:4318.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// OTLPInsecure sends OTLP over plain HTTP when OTLPEndpoint is host:port.
	OTLPInsecure bool `yaml:"otlp_insecure"`
	// ServiceName is the service.name resource attribute; empty means "t1".
	ServiceName string `yaml:"service_name"`
	// MetricInterval is how often metrics are exported; zero means one minute.
	// Shutdown exports whatever is pending regardless.
	MetricInterval time.Duration `yaml:"metric_interval"`
}

// DefaultConfig returns the configuration used when none is given: both
// exporters off, service name "t1", metrics every minute.
func DefaultConfig() Config {
	return Config{
		Traces:         Off,
		Metrics:        Off,
		ServiceName:    "t1",
		MetricInterval: time.Minute,
	}
}

// FieldError reports one invalid Config field. Field is the field's yaml
// key, so that a config loader can point at the offending line.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Validate reports every invalid field, one *FieldError each, joined with
// errors.Join; nil means Setup will accept c.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	for _, f := range []struct{ key, val string }{{"traces", c.Traces}, {"metrics", c.Metrics}} {
		switch f.val {
		case "", Off, Stdout, OTLP:
		case File:
			if c.File == "" {
				bad("file", "required when %s is %q", f.key, File)
			}
		default:
			bad(f.key, "unknown exporter %q (want off, stdout, file or otlp)", f.val)
		}
	}
	if ep := c.OTLPEndpoint; strings.Contains(ep, "://") {
		if u, err := url.Parse(ep); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("otlp_endpoint", "want host:port or an http(s) URL, got %q", ep)
		}
	}
	if c.MetricInterval < 0 {
		bad("metric_interval", "must not be negative, got %s", c.MetricInterval)
	}
	return errors.Join(errs...)
}

// Providers holds the tracer and meter providers that Setup installed as the
// otel globals. With an exporter off, the matching provider is a no-op.
type Providers struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider

	shutdowns []func(context.Context) error
	once      sync.Once
	err       error
}

// Setup builds the providers that cfg asks for and installs them, together
// with the W3C TraceContext and Baggage propagator, as the otel globals. The
// propagator is installed even with both exporters off, so trace context
// received in message headers still passes through to outgoing messages.
// Exporters connect lazily: an unreachable OTLP endpoint is not an error here,
// it is reported through the otel error handler, which logs with slog.
// The caller must call Shutdown to flush.
func Setup(ctx context.Context, cfg Config) (*Providers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		slog.Warn("telemetry export failed", "err", err)
	}))

	p := &Providers{
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  metricnoop.NewMeterProvider(),
	}
	if err := p.build(ctx, cfg); err != nil {
		// Release whatever was built before the failure; its error adds nothing.
		_ = p.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	otel.SetTracerProvider(p.TracerProvider)
	otel.SetMeterProvider(p.MeterProvider)
	return p, nil
}

func (p *Providers) build(ctx context.Context, cfg Config) error {
	if on(cfg.Traces) == Off && on(cfg.Metrics) == Off {
		return nil
	}
	name := cfg.ServiceName
	if name == "" {
		name = "t1"
	}
	// Environment first so that the configured service name wins over
	// OTEL_SERVICE_NAME while other OTEL_RESOURCE_ATTRIBUTES still apply.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
		resource.WithAttributes(attribute.String("service.name", name)),
	)
	if err != nil {
		return fmt.Errorf("resource: %w", err)
	}

	var file io.Writer
	if on(cfg.Traces) == File || on(cfg.Metrics) == File {
		f, err := os.OpenFile(cfg.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open %s: %w", cfg.File, err)
		}
		// Registered first so it is closed last, after both providers flushed.
		p.shutdowns = append(p.shutdowns, func(context.Context) error { return f.Close() })
		file = &lockedWriter{w: f}
	}

	switch on(cfg.Traces) {
	case Stdout, File:
		w := io.Writer(os.Stdout)
		if on(cfg.Traces) == File {
			w = file
		}
		exp, err := stdouttrace.New(stdouttrace.WithWriter(w))
		if err != nil {
			return fmt.Errorf("trace exporter: %w", err)
		}
		p.setTracer(exp, res)
	case OTLP:
		var opts []otlptracehttp.Option
		if ep := cfg.OTLPEndpoint; strings.Contains(ep, "://") {
			opts = append(opts, otlptracehttp.WithEndpointURL(signalURL(ep, "traces")))
		} else if ep != "" {
			opts = append(opts, otlptracehttp.WithEndpoint(ep))
		}
		if cfg.OTLPInsecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return fmt.Errorf("trace exporter: %w", err)
		}
		p.setTracer(exp, res)
	}

	var exp sdkmetric.Exporter
	switch on(cfg.Metrics) {
	case Stdout, File:
		w := io.Writer(os.Stdout)
		if on(cfg.Metrics) == File {
			w = file
		}
		exp, err = stdoutmetric.New(stdoutmetric.WithWriter(w))
	case OTLP:
		var opts []otlpmetrichttp.Option
		if ep := cfg.OTLPEndpoint; strings.Contains(ep, "://") {
			opts = append(opts, otlpmetrichttp.WithEndpointURL(signalURL(ep, "metrics")))
		} else if ep != "" {
			opts = append(opts, otlpmetrichttp.WithEndpoint(ep))
		}
		if cfg.OTLPInsecure {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
		exp, err = otlpmetrichttp.New(ctx, opts...)
	default:
		return nil
	}
	if err != nil {
		return fmt.Errorf("metric exporter: %w", err)
	}
	interval := cfg.MetricInterval
	if interval == 0 {
		interval = time.Minute
	}
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(interval))),
	)
	p.MeterProvider = mp
	p.shutdowns = append(p.shutdowns, mp.Shutdown)
	return nil
}

func (p *Providers) setTracer(exp sdktrace.SpanExporter, res *resource.Resource) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	p.TracerProvider = tp
	p.shutdowns = append(p.shutdowns, tp.Shutdown)
}

// Shutdown flushes pending spans and metrics, stops the exporters and closes
// the export file. Only the first call does anything; later calls return its
// result. ctx bounds how long flushing may take.
func (p *Providers) Shutdown(ctx context.Context) error {
	p.once.Do(func() {
		var errs []error
		for i := len(p.shutdowns) - 1; i >= 0; i-- {
			errs = append(errs, p.shutdowns[i](ctx))
		}
		p.err = errors.Join(errs...)
	})
	return p.err
}

// signalURL appends the per-signal path to a base OTLP URL, the way
// OTEL_EXPORTER_OTLP_ENDPOINT is interpreted: one endpoint serves both
// signals, so "http://collector:4318/otlp" sends traces to
// "http://collector:4318/otlp/v1/traces".
func signalURL(base, signal string) string {
	u, err := url.Parse(base)
	if err != nil {
		// Let the exporter report the malformed URL.
		return base
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/" + signal
	return u.String()
}

// on maps the empty exporter name to Off.
func on(name string) string {
	if name == "" {
		return Off
	}
	return name
}

// lockedWriter serialises writes from the span and metric exporters, which
// share one file and flush from their own goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
