package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/t1pipe/t1/keys"
)

// Header names carried on every event message.
const (
	HeaderType        = "T1-Type"
	HeaderRun         = "T1-Run"
	HeaderTime        = "T1-Time"
	HeaderSchema      = "T1-Schema"
	HeaderCausation   = "T1-Causation"
	HeaderCorrelation = "T1-Correlation"
	// Dead-letter headers describe why a message left its consumer.
	HeaderDeadReason     = "T1-Dead-Reason"
	HeaderDeadConsumer   = "T1-Dead-Consumer"
	HeaderDeadStreamSeq  = "T1-Dead-Stream-Seq"
	HeaderDeadDeliveries = "T1-Dead-Deliveries"
	HeaderDeadSubject    = "T1-Dead-Subject"
)

// LogConfig names the event stream and its dead-letter stream.
type LogConfig struct {
	// Stream holds every event, subjects t1.>. Limits retention: events are
	// kept for replay, not removed when consumed.
	Stream string
	// DeadLetter holds messages that exhausted their deliveries, subjects
	// <stream lower-cased>dlq.>.
	DeadLetter string
	// DedupWindow is how long a Nats-Msg-Id is remembered. Outputs of an
	// input older than half of it are checked against the stored ids before
	// they are published (see the package documentation), so a longer
	// window only makes that check rarer. Default 10m.
	DedupWindow time.Duration
	// MaxAge bounds retention; zero keeps events forever.
	MaxAge   time.Duration
	Replicas int
}

func (c LogConfig) withDefaults() LogConfig {
	if c.Stream == "" {
		c.Stream = "T1"
	}
	if c.DeadLetter == "" {
		c.DeadLetter = c.Stream + "_DLQ"
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = 10 * time.Minute
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	return c
}

// Log is the event log: the JetStream stream every stage reads and appends.
type Log struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	dlq    jetstream.Stream
	cfg    LogConfig
	// readHook, when set, sees every event the log's replays read.
	readHook func(Event)
}

// OpenLog creates or updates the event and dead-letter streams and returns
// a handle to them. It is safe to call from many processes at once.
func OpenLog(ctx context.Context, nc *nats.Conn, cfg LogConfig) (*Log, error) {
	cfg = cfg.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("engine: jetstream: %w", err)
	}
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "t1 event log",
		Subjects:    []string{"t1.>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  cfg.DedupWindow,
		MaxAge:      cfg.MaxAge,
		Replicas:    cfg.Replicas,
		Discard:     jetstream.DiscardOld,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: event stream %s: %w", cfg.Stream, err)
	}
	dlq, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.DeadLetter,
		Description: "t1 dead letters: events that exhausted their deliveries",
		Subjects:    []string{dlqPrefix(cfg) + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  cfg.DedupWindow,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: dead-letter stream %s: %w", cfg.DeadLetter, err)
	}
	return &Log{nc: nc, js: js, stream: stream, dlq: dlq, cfg: cfg}, nil
}

func dlqPrefix(cfg LogConfig) string { return strings.ToLower(cfg.Stream) + "dlq" }

// JetStream exposes the context for callers that need raw access (status).
func (l *Log) JetStream() jetstream.JetStream { return l.js }

// Config is the effective configuration.
func (l *Log) Config() LogConfig { return l.cfg }

// Stream is the event stream.
func (l *Log) Stream() jetstream.Stream { return l.stream }

// DeadLetters is the dead-letter stream.
func (l *Log) DeadLetters() jetstream.Stream { return l.dlq }

func (l *Log) message(ctx context.Context, ev *Event) (*nats.Msg, error) {
	if err := keys.ValidRun(ev.Run); err != nil {
		return nil, fmt.Errorf("engine: publish: %w", err)
	}
	if err := ValidType(ev.Type); err != nil {
		return nil, fmt.Errorf("engine: publish: %w", err)
	}
	if ev.ID == "" {
		return nil, errors.New("engine: publish: event has no id")
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	if ev.SchemaVersion == 0 {
		ev.SchemaVersion = 1
	}
	// Binary mode, as in CloudEvents: the envelope rides in headers and the
	// body is the payload alone, so routing an event never parses its
	// payload.
	msg := nats.NewMsg(ev.Subject())
	msg.Data = ev.Payload
	msg.Header.Set(jetstream.MsgIDHeader, ev.ID)
	msg.Header.Set(HeaderType, ev.Type)
	msg.Header.Set(HeaderRun, ev.Run)
	msg.Header.Set(HeaderTime, ev.Time.Format(time.RFC3339Nano))
	msg.Header.Set(HeaderSchema, strconv.Itoa(ev.SchemaVersion))
	if ev.CausationID != "" {
		msg.Header.Set(HeaderCausation, ev.CausationID)
	}
	if ev.CorrelationID != "" {
		msg.Header.Set(HeaderCorrelation, ev.CorrelationID)
	}
	injectTrace(ctx, msg.Header)
	return msg, nil
}

// Publish appends ev and waits for the stream's acknowledgement. A second
// publish of the same id inside the dedup window is acknowledged but not
// stored; the returned event then carries the original sequence.
func (l *Log) Publish(ctx context.Context, ev Event) (Event, error) {
	msg, err := l.message(ctx, &ev)
	if err != nil {
		return ev, err
	}
	ack, err := l.js.PublishMsg(ctx, msg)
	if err != nil {
		return ev, l.publishError(ev, msg, err)
	}
	ev.Seq = ack.Sequence
	return ev, nil
}

// pubAckWait bounds the wait for one batch of publish acknowledgements. A
// server that stops between storing a message and answering never answers;
// the batch is then retried, and its ids keep the retry from duplicating.
const pubAckWait = 20 * time.Second

// publishAll publishes evs asynchronously and waits for every
// acknowledgement; it returns the first error. An event too large for the
// server is a Permanent error: no retry can make it fit.
func (l *Log) publishAll(ctx context.Context, evs []Event) error {
	futures := make([]jetstream.PubAckFuture, 0, len(evs))
	for i := range evs {
		msg, err := l.message(ctx, &evs[i])
		if err != nil {
			return err
		}
		f, err := l.js.PublishMsgAsync(msg)
		if err != nil {
			return l.publishError(evs[i], msg, err)
		}
		futures = append(futures, f)
	}
	timeout := time.NewTimer(pubAckWait)
	defer timeout.Stop()
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			evs[i].Seq = ack.Sequence
		case err := <-f.Err():
			return fmt.Errorf("engine: publish %s %s: %w", evs[i].Type, evs[i].ID, err)
		case <-timeout.C:
			return fmt.Errorf("engine: publish %s %s: no acknowledgement within %s", evs[i].Type, evs[i].ID, pubAckWait)
		case <-ctx.Done():
			return fmt.Errorf("engine: publish %s %s: %w", evs[i].Type, evs[i].ID, ctx.Err())
		}
	}
	return nil
}

// publishError names the event; one over the server's payload limit is
// reported with both sizes and marked Permanent.
func (l *Log) publishError(ev Event, msg *nats.Msg, err error) error {
	if errors.Is(err, nats.ErrMaxPayload) {
		return Permanent(fmt.Errorf("engine: publish %s %s: its payload is %d bytes, over the server's limit of %d per message: %w",
			ev.Type, ev.ID, len(msg.Data), l.nc.MaxPayload(), err))
	}
	return fmt.Errorf("engine: publish %s %s: %w", ev.Type, ev.ID, err)
}

// ParseMessage decodes an event message. A message that is not a valid
// envelope yields an error naming its subject.
func ParseMessage(subject string, h nats.Header, data []byte, seq uint64) (Event, error) {
	ev := Event{
		ID:            h.Get(jetstream.MsgIDHeader),
		Type:          h.Get(HeaderType),
		Run:           h.Get(HeaderRun),
		CausationID:   h.Get(HeaderCausation),
		CorrelationID: h.Get(HeaderCorrelation),
		Payload:       data,
		Seq:           seq,
	}
	if ev.ID == "" || ev.Type == "" || ev.Run == "" {
		return ev, fmt.Errorf("malformed event envelope on %s: headers %s, %s and %s are required",
			subject, jetstream.MsgIDHeader, HeaderType, HeaderRun)
	}
	if want := Subject(ev.Run, ev.Type); want != subject {
		return ev, fmt.Errorf("event %s published on %s but its envelope says %s", ev.ID, subject, want)
	}
	v, err := strconv.Atoi(h.Get(HeaderSchema))
	if err != nil || v < 1 {
		return ev, fmt.Errorf("malformed event envelope on %s: bad %s %q", subject, HeaderSchema, h.Get(HeaderSchema))
	}
	ev.SchemaVersion = v
	if ts := h.Get(HeaderTime); ts != "" {
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return ev, fmt.Errorf("malformed event envelope on %s: bad %s %q", subject, HeaderTime, ts)
		}
		ev.Time = t
	}
	return ev, nil
}

// splitSubject recovers run and type from t1.<run>.<type>.
func splitSubject(subject string) (run, typ string, ok bool) {
	return cutSubject("t1", subject)
}

// cutSubject recovers run and type from <prefix>.<run>.<type>, the shape
// of event subjects (prefix t1) and dead-letter subjects.
func cutSubject(prefix, subject string) (run, typ string, ok bool) {
	rest, found := strings.CutPrefix(subject, prefix+".")
	if !found {
		return "", "", false
	}
	run, typ, found = strings.Cut(rest, ".")
	return run, typ, found && run != "" && typ != ""
}
