package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
)

// Emitter collects the events a handler produces. Nothing is published
// while the handler runs: when it returns nil the runner publishes every
// collected event, waits until JetStream has stored them all, and only then
// acknowledges the input. A handler that fails therefore has no effects.
type Emitter interface {
	// Emit records an event of type typ caused by the event being handled
	// and returns it with its derived id. Sibling events of one type need
	// distinct keys (WithKey); without one, the emit order numbers them,
	// which is stable only if the handler is deterministic.
	Emit(typ string, payload any, opts ...EmitOption) (Event, error)
}

// EmitOption adjusts one emitted event.
type EmitOption func(*emitSpec)

type emitSpec struct {
	key     string
	version int
	run     string
	stable  bool
}

// WithKey distinguishes sibling events of one type from one cause, such as
// attempt numbers or task ids.
func WithKey(key string) EmitOption { return func(s *emitSpec) { s.key = key } }

// AsDecision makes the event's id depend on its run, type, stage
// configuration and key only, not on the event being handled: a stage that
// decides from a fold of the log (control) may reach the same decision
// while handling different events, and the repeats must collapse into one
// event (JetStream drops them within the dedup window).
func AsDecision(key string) EmitOption {
	return func(s *emitSpec) { s.key, s.stable = key, true }
}

// WithSchemaVersion sets the payload schema version (default 1).
func WithSchemaVersion(v int) EmitOption { return func(s *emitSpec) { s.version = v } }

// HandlerFunc handles one event. Returning an error wrapped with Permanent
// fails the event for good; any other error is retried with back-off.
type HandlerFunc func(ctx context.Context, ev Event, out Emitter) error

// Middleware wraps a handler, e.g. with logging or metrics.
type Middleware func(HandlerFunc) HandlerFunc

// Stage is one pipeline step: it consumes some event types and emits others.
// Stages never call each other; events are the only thing they share.
type Stage interface {
	// Name is stable: it names the durable consumer and feeds event ids.
	Name() string
	// Consumes lists the event types the stage reacts to.
	Consumes() []string
	// Handle processes one event. It may be called concurrently, and more
	// than once for the same event (redelivery), so it must be idempotent:
	// same input, same emitted events, same object keys.
	Handle(ctx context.Context, ev Event, out Emitter) error
}

// Serial is implemented by a stage whose handler must never run beside
// itself: one that folds the log into state each handler updates in turn
// (control, eval). NewRunner runs a stage whose Serial returns true with
// concurrency 1, whatever RunnerConfig.Concurrency says.
type Serial interface {
	Stage
	Serial() bool
}

type funcStage struct {
	name     string
	consumes []string
	h        HandlerFunc
}

func (s funcStage) Name() string       { return s.name }
func (s funcStage) Consumes() []string { return s.consumes }
func (s funcStage) Handle(ctx context.Context, ev Event, out Emitter) error {
	return s.h(ctx, ev, out)
}

// NewStage builds a Stage from a handler, applying middleware so that the
// first one listed is the outermost.
func NewStage(name string, consumes []string, h HandlerFunc, mw ...Middleware) Stage {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return funcStage{name: name, consumes: consumes, h: h}
}

// emitter derives ids from (run, type, cause, stage config hash, key).
type emitter struct {
	cause       Event
	configHash  string
	runOverride string
	counts      map[string]int
	out         []Event
}

func newEmitter(cause Event, configHash string) *emitter {
	return &emitter{cause: cause, configHash: configHash, counts: map[string]int{}}
}

func (e *emitter) Emit(typ string, payload any, opts ...EmitOption) (Event, error) {
	spec := emitSpec{version: 1}
	for _, o := range opts {
		o(&spec)
	}
	if err := ValidType(typ); err != nil {
		return Event{}, Permanent(err)
	}
	if spec.key == "" {
		spec.key = "#" + strconv.Itoa(e.counts[typ])
	}
	e.counts[typ]++
	raw, err := json.Marshal(payload)
	if err != nil {
		return Event{}, Permanent(fmt.Errorf("emit %s: payload: %w", typ, err))
	}
	run := e.cause.Run
	if e.runOverride != "" {
		run = e.runOverride
	}
	corr := e.cause.CorrelationID
	if corr == "" {
		corr = e.cause.ID
	}
	cause := e.cause.ID
	if spec.stable {
		cause = "decision"
	}
	ev := Event{
		ID:            DeriveID(run, typ, cause, e.configHash, spec.key),
		Type:          typ,
		Run:           run,
		CausationID:   e.cause.ID,
		CorrelationID: corr,
		SchemaVersion: spec.version,
		Payload:       raw,
	}
	e.out = append(e.out, ev)
	return ev, nil
}
