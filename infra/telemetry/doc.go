// Package telemetry sets up OpenTelemetry tracing and metrics for t1 and
// carries trace context across NATS.
//
// Setup installs tracer and meter providers and the W3C TraceContext and
// Baggage propagator as the otel globals, so instrumented code only uses
// otel.Tracer and otel.Meter. Exporters are chosen per signal: "off" (the
// default: nothing is recorded or written), "stdout" and "file" (JSON lines,
// one span or one metric batch per line) and "otlp" (OTLP over HTTP, for a
// collector, Jaeger, Tempo and the like).
//
// Inject and Extract move the trace context in and out of nats.Header, which
// is how one trace follows an event from stage to stage: a publisher injects
// the context of its current span into the message headers, and the handler
// of that message extracts it before starting its own span. Both use the
// global propagator, so Setup must run first; until then they do nothing.
//
// Call Providers.Shutdown before exit, or buffered spans and the last metric
// interval are lost.
package telemetry
