package engine

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// HeaderCarrier adapts NATS message headers to a propagation.TextMapCarrier,
// so W3C trace context ("traceparent", "tracestate") and baggage travel with
// each event and one trace follows it through every stage.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value for key. NATS headers are case-sensitive; a
// key that matches only when case is ignored is accepted as well, because
// bridges from HTTP tend to canonicalise "traceparent" to "Traceparent".
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set replaces the values for key. c must not be nil.
func (c HeaderCarrier) Set(key, value string) {
	c[key] = []string{value}
}

// Keys lists the header names present.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// injectTrace writes the trace context and baggage of ctx into h with the
// global propagator (a no-op until telemetry is set up), replacing any h
// already carries. h must not be nil.
func injectTrace(ctx context.Context, h nats.Header) {
	otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(h))
}

// extractTrace returns ctx extended with the remote trace context and
// baggage found in h, so spans started from it are children of the span
// that published the message.
func extractTrace(ctx context.Context, h nats.Header) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, HeaderCarrier(h))
}
