// Package telemetry sets up OpenTelemetry tracing and metrics for t1.
//
// Setup installs tracer and meter providers and the W3C TraceContext and
// Baggage propagator as the otel globals, so instrumented code only uses
// otel.Tracer and otel.Meter. Exporters are chosen per signal: "off" (the
// default: nothing is recorded or written), "stdout" and "file" (JSON lines,
// one span or one metric batch per line) and "otlp" (OTLP over HTTP, for a
// collector, Jaeger, Tempo and the like).
//
// The trace context crosses NATS in each event's headers: the engine
// injects the publisher's span context with the global propagator
// (engine.HeaderCarrier) and its runner extracts it before starting the
// handler's span, so one trace follows an event from stage to stage. Until
// Setup runs the propagator does nothing.
//
// Call Providers.Shutdown before exit, or buffered spans and the last metric
// interval are lost.
package telemetry
