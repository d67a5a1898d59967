package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/t1pipe/t1/keys"
)

// RunnerConfig tunes how a stage consumes its events. Zero values take the
// defaults in parentheses.
type RunnerConfig struct {
	// Concurrency is how many handlers run at once (4; always 1 for a
	// Serial stage).
	Concurrency int
	// AckWait is how long the server waits for an ack or heartbeat before
	// redelivering (30s).
	AckWait time.Duration
	// MaxDeliver bounds deliveries; the last failure dead-letters (5).
	MaxDeliver int
	// Backoff is the delay before redelivery after the n-th failed
	// delivery; the last entry repeats (1s, 5s, 15s). It also lengthens
	// the server's ack wait for later deliveries, so a crashed handler's
	// message comes back later each time.
	Backoff []time.Duration
	// Heartbeat is the InProgress interval that keeps long handlers alive
	// (AckWait/3). Negative disables heartbeats, which only tests want.
	Heartbeat time.Duration
	// MaxAckPending caps unacknowledged messages across every process
	// sharing the consumer (Concurrency; always 1 for a Serial stage, so
	// the server itself never has two of its inputs out at once). A
	// message pulled ahead of a free handler is kept in progress while it
	// waits, so a cap above Concurrency costs no redeliveries.
	MaxAckPending int
	// RetryBudget is how long transient errors are retried in process
	// before the message is handed back to the server (5s).
	RetryBudget time.Duration
	// ConfigHash identifies the stage's configuration; it feeds event ids,
	// so changed settings produce new events instead of being deduplicated
	// against old ones.
	ConfigHash string
	// Run, when set, scopes the runner to that run's events: its consumer
	// filters t1.<run>.<type> instead of every run's, so processes that
	// run one stage for different runs never share inputs (a Serial stage
	// is single per run, not per log).
	Run string
	// Durable names the consumer (Durable(stage, Run)).
	Durable string
	// From is where the consumer starts when it is made: the beginning
	// of the log when zero. It must not change for a consumer that
	// exists (the server refuses to move one).
	From   ReplayFrom
	Logger *slog.Logger
}

// Durable is the name of the consumer of stage, over every run when run is
// empty, else over run alone. '_' is in neither a stage's name nor a run
// id, so no scoped name is another stage's.
func Durable(stage, run string) string {
	if run == "" {
		return stage
	}
	return stage + "_" + run
}

func (c RunnerConfig) withDefaults(stage string) RunnerConfig {
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 5
	}
	if len(c.Backoff) == 0 {
		c.Backoff = []time.Duration{time.Second, 5 * time.Second, 15 * time.Second}
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = c.AckWait / 3
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = c.Concurrency
	}
	if c.RetryBudget <= 0 {
		c.RetryBudget = 5 * time.Second
	}
	if c.Durable == "" {
		c.Durable = Durable(stage, c.Run)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// RunnerStats counts outcomes since the runner started.
type RunnerStats struct {
	Acked, Failed, Retried, DeadLettered int64
}

// Runner feeds one stage from a durable pull consumer.
type Runner struct {
	log   *Log
	stage Stage
	cfg   RunnerConfig

	lastErr   sync.Map // stream seq -> last handler error, for dead-letter reasons
	attrCache sync.Map // type+outcome -> metric.MeasurementOption

	acked, failed, retried, dead atomic.Int64

	// afterPublish, when set, runs between publishing outputs and acking;
	// tests use it to crash at the worst moment.
	afterPublish func()

	tracer   trace.Tracer
	handled  metric.Int64Counter
	duration metric.Float64Histogram
}

// NewRunner prepares a runner; Run starts it.
func NewRunner(l *Log, s Stage, cfg RunnerConfig) *Runner {
	if se, ok := s.(Serial); ok && se.Serial() {
		cfg.Concurrency, cfg.MaxAckPending = 1, 1
	}
	cfg = cfg.withDefaults(s.Name())
	meter := otel.Meter("github.com/t1pipe/t1/engine")
	handled, _ := meter.Int64Counter("t1.engine.events",
		metric.WithDescription("events handled, by stage, type and outcome"))
	duration, _ := meter.Float64Histogram("t1.engine.handler.duration",
		metric.WithUnit("s"), metric.WithDescription("handler wall time"))
	return &Runner{
		log: l, stage: s, cfg: cfg,
		tracer:  otel.Tracer("github.com/t1pipe/t1/engine"),
		handled: handled, duration: duration,
	}
}

// Durable names the runner's consumer.
func (r *Runner) Durable() string { return r.cfg.Durable }

// Stats returns outcome counts.
func (r *Runner) Stats() RunnerStats {
	return RunnerStats{Acked: r.acked.Load(), Failed: r.failed.Load(), Retried: r.retried.Load(), DeadLettered: r.dead.Load()}
}

// ConsumerConfig is the durable consumer the runner creates for a stage.
func (r *Runner) ConsumerConfig() jetstream.ConsumerConfig {
	filters := make([]string, 0, len(r.stage.Consumes()))
	for _, t := range r.stage.Consumes() {
		if r.cfg.Run != "" {
			filters = append(filters, Subject(r.cfg.Run, t))
		} else {
			filters = append(filters, SubjectFilter(t))
		}
	}
	// Entry i is the ack wait of delivery i+1: the server redelivers a
	// message whose handler died later each time.
	bo := []time.Duration{r.cfg.AckWait}
	for _, d := range r.cfg.Backoff {
		if len(bo) >= r.cfg.MaxDeliver {
			break
		}
		bo = append(bo, r.cfg.AckWait+d)
	}
	desc := "t1 stage " + r.stage.Name()
	if r.cfg.Run != "" {
		desc += " of run " + r.cfg.Run
	}
	cc := jetstream.ConsumerConfig{
		Durable:       r.cfg.Durable,
		Description:   desc,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.AckWait,
		BackOff:       bo,
		MaxDeliver:    r.cfg.MaxDeliver,
		MaxAckPending: r.cfg.MaxAckPending,
	}
	cc.DeliverPolicy, cc.OptStartSeq, cc.OptStartTime = r.cfg.From.deliver()
	// One filter goes in the single-subject field, which every JetStream
	// server understands; a list of them needs nats-server 2.10 or newer.
	if len(filters) == 1 {
		cc.FilterSubject = filters[0]
	} else {
		cc.FilterSubjects = filters
	}
	return cc
}

// createConsumer creates or updates the stage's durable consumer. A server
// too old for several filter subjects is named as the reason.
func (r *Runner) createConsumer(ctx context.Context) (jetstream.Consumer, error) {
	cons, err := r.log.js.CreateOrUpdateConsumer(ctx, r.log.cfg.Stream, r.ConsumerConfig())
	if errors.Is(err, jetstream.ErrConsumerMultipleFilterSubjectsNotSupported) {
		return nil, fmt.Errorf("engine: consumer %s filters %d event types, which needs nats-server 2.10 or newer (this server is %s)",
			r.cfg.Durable, len(r.stage.Consumes()), r.log.nc.ConnectedServerVersion())
	}
	if err != nil {
		return nil, fmt.Errorf("engine: consumer %s: %w", r.cfg.Durable, err)
	}
	return cons, nil
}

// Run consumes until ctx is cancelled, then stops pulling, waits for
// handlers in flight (their context is cancelled too) and returns nil.
// Messages whose handlers did not finish are naked for prompt redelivery.
//
// Only the first consumer set-up fails Run. Once consuming, a lost
// consumer (the server restarted, the consumer or stream was deleted or is
// briefly unavailable) is re-created with back-off until ctx ends, so a
// stage rides out a bus outage instead of silently stopping. Run returns
// an error if the connection is closed under it.
func (r *Runner) Run(ctx context.Context) error {
	if len(r.stage.Consumes()) == 0 {
		return fmt.Errorf("engine: stage %s consumes nothing", r.stage.Name())
	}
	if r.cfg.Run != "" {
		if err := keys.ValidRun(r.cfg.Run); err != nil {
			return fmt.Errorf("engine: stage %s scoped to a run: %w", r.stage.Name(), err)
		}
	}
	cons, err := r.createConsumer(ctx)
	if err != nil {
		return err
	}
	adv, err := r.log.nc.Subscribe(maxDeliveriesSubject(r.log.cfg.Stream, r.cfg.Durable), func(m *nats.Msg) {
		r.onMaxDeliveries(ctx, m.Data)
	})
	if err != nil {
		return fmt.Errorf("engine: advisory subscription: %w", err)
	}
	defer adv.Unsubscribe()

	// Long-lived workers rather than a goroutine per message: handlers
	// then start on warm stacks. A slot is held from the pull request
	// that asks for a message until the handler of that message returns
	// (consume).
	work := make(chan jetstream.Msg)
	slots := make(chan struct{}, 2*r.cfg.Concurrency)
	for range cap(slots) {
		slots <- struct{}{}
	}
	var wg, fetches sync.WaitGroup
	for range r.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for msg := range work {
				r.process(ctx, msg)
				slots <- struct{}{}
			}
		}()
	}
	defer wg.Wait()
	defer close(work)
	// Pulls still delivering must finish before work closes.
	defer fetches.Wait()

	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 5 * time.Second
	b.MaxElapsedTime = 0
	for {
		fed, err := r.consume(ctx, cons, work, slots, &fetches)
		if ctx.Err() != nil {
			return nil
		}
		// A consumer that fed nothing before it was lost again does not
		// reset the back-off, so a persistent failure is not retried in a
		// tight loop.
		if fed > 0 {
			b.Reset()
		}
		if r.log.nc.IsClosed() {
			return fmt.Errorf("engine: stage %s: NATS connection closed", r.stage.Name())
		}
		r.cfg.Logger.Warn("consumer lost, re-creating it", "stage", r.stage.Name(), "err", err)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(b.NextBackOff()):
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cons, err = r.createConsumer(cctx)
			cancel()
			if err == nil {
				break
			}
			if r.log.nc.IsClosed() {
				return fmt.Errorf("engine: stage %s: NATS connection closed", r.stage.Name())
			}
			r.cfg.Logger.Debug("re-create consumer", "stage", r.stage.Name(), "err", err)
		}
		r.cfg.Logger.Info("consumer re-created", "stage", r.stage.Name())
	}
}

// pullHeartbeat is how often the server confirms a waiting pull request;
// a request missing two of them is taken as lost with its consumer.
const pullHeartbeat = 2 * time.Second

// consume feeds work from pull requests on cons until ctx ends or a pull
// shows the consumer lost; it returns how many messages it fed and why it
// stopped.
//
// slots holds 2 × Concurrency tokens: one per message a worker handles or
// a pull has asked for or holds, as nats.go's Messages iterator kept one
// batch of Concurrency buffered beside the workers. A pull (a Fetch) asks
// for every free token once half of them are free, or for any free token
// when no pull is alive, so a free worker never waits for work the server
// has. A token comes back when its handler returns or its request ended
// without a message. The Messages iterator was not used: it re-pulls only
// when a message is taken out while no earlier request is still being
// sent, so a batch consumed in full during that window left the stage
// idle, with work waiting, until its heartbeat check expired 30 s later
// ("nats: no heartbeat received").
func (r *Runner) consume(ctx context.Context, cons jetstream.Consumer, work chan<- jetstream.Msg, slots chan struct{}, fetches *sync.WaitGroup) (int, error) {
	var fed atomic.Int64
	var alive atomic.Int32
	lost := make(chan error, 1)
	ended := make(chan struct{}, 1)
	n := 0
	release := func() {
		for ; n > 0; n-- {
			slots <- struct{}{}
		}
	}
	for {
		for {
		take:
			for {
				select {
				case <-slots:
					n++
				default:
					break take
				}
			}
			if n >= r.cfg.Concurrency || (n > 0 && alive.Load() == 0) {
				break
			}
			select {
			case <-ctx.Done():
				release()
				return int(fed.Load()), ctx.Err()
			case err := <-lost:
				release()
				return int(fed.Load()), err
			case <-slots:
				n++
			case <-ended:
			}
		}
		batch, err := cons.Fetch(n, jetstream.FetchContext(ctx), jetstream.FetchHeartbeat(pullHeartbeat))
		if err != nil {
			release()
			if ctx.Err() != nil {
				return int(fed.Load()), ctx.Err()
			}
			return int(fed.Load()), fmt.Errorf("engine: pull %s: %w", r.cfg.Durable, err)
		}
		alive.Add(1)
		fetches.Add(1)
		go func(asked int) {
			defer fetches.Done()
			got := 0
			for msg := range batch.Messages() {
				got++
				if r.hand(ctx, work, msg) {
					fed.Add(1)
				} else {
					// Shutting down: hand it straight back.
					_ = msg.Nak()
					slots <- struct{}{}
				}
			}
			for range asked - got {
				slots <- struct{}{}
			}
			// An expired request ends without an error; one that ends with
			// one (consumer deleted, heartbeats missing after a server
			// restart) makes Run re-create the consumer.
			if err := batch.Error(); err != nil && ctx.Err() == nil {
				select {
				case lost <- err:
				default:
				}
			}
			alive.Add(-1)
			select {
			case ended <- struct{}{}:
			default:
			}
		}(n)
		n = 0
	}
}

// hand gives msg to a free worker; false when ctx ends first. A message
// pulled ahead waits for a worker with its ack timer running, so while it
// waits it is kept in progress as a handled one is: otherwise, behind
// handlers longer than the ack wait, the server would hand it to another
// worker sharing the consumer and both would do its work.
func (r *Runner) hand(ctx context.Context, work chan<- jetstream.Msg, msg jetstream.Msg) bool {
	select {
	case work <- msg:
		return true
	case <-ctx.Done():
		return false
	default:
	}
	var tick <-chan time.Time
	if r.cfg.Heartbeat > 0 {
		t := time.NewTicker(r.cfg.Heartbeat)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case work <- msg:
			return true
		case <-ctx.Done():
			return false
		case <-tick:
			if err := msg.InProgress(); err != nil {
				r.cfg.Logger.Debug("heartbeat of a waiting message", "stage", r.stage.Name(), "err", err)
			}
		}
	}
}

func maxDeliveriesSubject(stream, consumer string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + stream + "." + consumer
}

// heartbeat keeps msg in progress until the returned func is called.
func (r *Runner) heartbeat(msg jetstream.Msg) func() {
	if r.cfg.Heartbeat < 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := msg.InProgress(); err != nil {
					r.cfg.Logger.Debug("heartbeat", "stage", r.stage.Name(), "err", err)
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (r *Runner) process(ctx context.Context, msg jetstream.Msg) {
	start := time.Now()
	stopHB := r.heartbeat(msg)
	defer stopHB()
	meta, err := msg.Metadata()
	if err != nil {
		r.cfg.Logger.Error("message without metadata", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	seq := meta.Sequence.Stream
	ev, err := ParseMessage(msg.Subject(), msg.Headers(), msg.Data(), seq)
	if err != nil {
		r.fail(ctx, msg, meta, ev, Permanent(err))
		return
	}
	hctx := extractTrace(ctx, msg.Headers())
	hctx, span := r.tracer.Start(hctx, r.stage.Name()+" "+ev.Type,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("t1.stage", r.stage.Name()),
			attribute.String("t1.event.id", ev.ID),
			attribute.String("t1.event.type", ev.Type),
			attribute.String("t1.run", ev.Run),
			attribute.Int64("t1.delivery", int64(meta.NumDelivered)),
		))
	defer span.End()

	out, err := r.handle(hctx, ev)
	if err == nil {
		out, err = r.log.unpublished(hctx, meta.Timestamp, out)
	}
	if err == nil {
		err = r.log.publishAll(hctx, out)
	}
	if err == nil && r.afterPublish != nil {
		r.afterPublish()
	}
	outcome := "acked"
	defer func() {
		attrs := r.attrs(ev.Type, outcome)
		r.handled.Add(context.Background(), 1, attrs)
		r.duration.Record(context.Background(), time.Since(start).Seconds(), attrs)
	}()
	switch {
	case err == nil:
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := msg.DoubleAck(actx)
		cancel()
		if err != nil {
			// Outputs are durable and deduplicated, so a lost ack costs only
			// a redelivery.
			r.cfg.Logger.Warn("ack", "stage", r.stage.Name(), "event", ev.ID, "err", err)
		}
		r.lastErr.Delete(seq)
		r.acked.Add(1)
	case ctx.Err() != nil:
		outcome = "interrupted"
		// Shutting down: hand the message straight back to whoever is left.
		// Before the permanent case, since what a handler returns while its
		// context is cancelled (a sandbox killed under it) may read as
		// permanent and is not the input's fault; a truly permanent error
		// comes back on the redelivery.
		_ = msg.Nak()
	case IsPermanent(err):
		outcome = "failed"
		span.SetStatus(codes.Error, err.Error())
		r.fail(ctx, msg, meta, ev, err)
	default:
		outcome = "retried"
		span.SetStatus(codes.Error, err.Error())
		r.lastErr.Store(seq, err.Error())
		if int(meta.NumDelivered) >= r.cfg.MaxDeliver {
			outcome = "dead"
			// The dead letter keeps the input for a replay; the failed
			// event tells the stages that wait on its outcome.
			r.deadLetter(ctx, seq, meta.NumDelivered, err.Error())
			r.fail(ctx, msg, meta, ev, fmt.Errorf("gave up after %d deliveries: %w", meta.NumDelivered, err))
			return
		}
		r.retried.Add(1)
		r.cfg.Logger.Warn("handler failed, will retry", "stage", r.stage.Name(), "event", ev.ID,
			"type", ev.Type, "delivery", meta.NumDelivered, "err", err)
		_ = msg.NakWithDelay(r.delay(int(meta.NumDelivered)))
	}
}

// attrs caches metric attribute sets: building one per event costs more
// than the rest of a no-op handler.
func (r *Runner) attrs(typ, outcome string) metric.MeasurementOption {
	key := typ + "\x00" + outcome
	if v, ok := r.attrCache.Load(key); ok {
		return v.(metric.MeasurementOption)
	}
	opt := metric.WithAttributeSet(attribute.NewSet(attribute.String("stage", r.stage.Name()),
		attribute.String("type", typ), attribute.String("outcome", outcome)))
	r.attrCache.Store(key, opt)
	return opt
}

func (r *Runner) delay(delivered int) time.Duration {
	i := delivered - 1
	if i >= len(r.cfg.Backoff) {
		i = len(r.cfg.Backoff) - 1
	}
	if i < 0 {
		i = 0
	}
	return r.cfg.Backoff[i]
}

// handle runs the handler, retrying transient errors within RetryBudget.
// Each attempt gets a fresh emitter, so a failed attempt leaves nothing.
func (r *Runner) handle(ctx context.Context, ev Event) ([]Event, error) {
	var out []Event
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxElapsedTime = r.cfg.RetryBudget
	op := func() error {
		em := newEmitter(ev, r.cfg.ConfigHash)
		err := r.safeHandle(ctx, ev, em)
		if err == nil {
			out = em.out
			return nil
		}
		if IsPermanent(err) || ctx.Err() != nil {
			return backoff.Permanent(err)
		}
		return err
	}
	err := backoff.Retry(op, backoff.WithContext(b, ctx))
	return out, err
}

// safeHandle turns a handler panic into a permanent error: a panic on one
// input will panic again on redelivery.
func (r *Runner) safeHandle(ctx context.Context, ev Event, em *emitter) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Permanent(fmt.Errorf("stage %s panicked on %s: %v", r.stage.Name(), ev.ID, p))
		}
	}()
	return r.stage.Handle(ctx, ev, em)
}

// fail publishes <type>.failed and terminates the message. When no failed
// event can be formed (the subject itself is unusable) the message is
// dead-lettered instead, so it is never silently dropped.
func (r *Runner) fail(ctx context.Context, msg jetstream.Msg, meta *jetstream.MsgMetadata, ev Event, cause error) {
	r.failed.Add(1)
	reason := cause.Error()
	r.cfg.Logger.Warn("event failed", "stage", r.stage.Name(), "subject", msg.Subject(), "event", ev.ID, "reason", reason)
	if failed, ok := r.failure(msg.Subject(), ev, meta.Sequence.Stream, meta.NumDelivered, reason); ok {
		if err := r.publishFailure(ctx, failed, meta.Timestamp); err != nil {
			// Without the failed event the input must come back, or it is lost.
			r.cfg.Logger.Error("publish failed event", "stage", r.stage.Name(), "err", err)
			_ = msg.NakWithDelay(r.delay(int(meta.NumDelivered)))
			return
		}
	} else {
		r.deadLetter(ctx, meta.Sequence.Stream, meta.NumDelivered, reason)
	}
	r.term(msg, reason)
}

// failure is the <type>.failed event of the input at seq, derived from
// it so that every process and every path that gives up on the input
// builds the same one; ok is false when the subject names no valid run
// and type to publish it under.
func (r *Runner) failure(subject string, ev Event, seq, deliveries uint64, reason string) (Event, bool) {
	run, typ, ok := splitSubject(subject)
	if !ok || keys.ValidRun(run) != nil || ValidType(typ) != nil {
		return Event{}, false
	}
	causeID := ev.ID
	if causeID == "" {
		causeID = "seq-" + strconv.FormatUint(seq, 10)
	}
	payload, _ := json.Marshal(Failure{
		Stage: r.stage.Name(), EventID: causeID, Type: typ, Reason: reason, Attempts: int(deliveries),
	})
	corr := ev.CorrelationID
	if corr == "" {
		corr = causeID
	}
	return Event{
		ID:            DeriveID(run, FailedType(typ), causeID, r.cfg.ConfigHash, r.stage.Name()),
		Type:          FailedType(typ),
		Run:           run,
		CausationID:   causeID,
		CorrelationID: corr,
		SchemaVersion: 1,
		Payload:       payload,
	}, true
}

// publishFailure publishes failed unless the log already has it; input is
// when the failed input was stored.
func (r *Runner) publishFailure(ctx context.Context, failed Event, input time.Time) error {
	out, err := r.log.unpublished(ctx, input, []Event{failed})
	if err == nil {
		err = r.log.publishAll(ctx, out)
	}
	return err
}

// term terminates msg with reason. Servers before 2.10.4 ignore a
// terminate that carries a reason and redeliver the message until it is
// dead-lettered, so they get a bare one.
func (r *Runner) term(msg jetstream.Msg, reason string) {
	if !serverAtLeast(r.log.nc.ConnectedServerVersion(), 2, 10, 4) {
		_ = msg.Term()
		return
	}
	_ = msg.TermWithReason(truncate(reason, 200))
}

// serverAtLeast compares a server version such as "2.9.10" or
// "2.11.0-RC.1" with major.minor.patch; an unreadable one counts as new.
func serverAtLeast(version string, major, minor, patch int) bool {
	core, _, _ := strings.Cut(version, "-")
	parts := strings.SplitN(core, ".", 3)
	if len(parts) != 3 {
		return true
	}
	var got [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return true
		}
		got[i] = n
	}
	for i, w := range [3]int{major, minor, patch} {
		if got[i] != w {
			return got[i] > w
		}
	}
	return true
}

type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

func (r *Runner) onMaxDeliveries(ctx context.Context, data []byte) {
	var a maxDeliveriesAdvisory
	if err := json.Unmarshal(data, &a); err != nil {
		r.cfg.Logger.Error("bad max-deliveries advisory", "err", err)
		return
	}
	reason := "delivered " + strconv.FormatUint(a.Deliveries, 10) + " times without an acknowledgement (handler crashed or outlived its ack wait)"
	if v, ok := r.lastErr.Load(a.StreamSeq); ok {
		reason = v.(string)
	}
	raw, err := r.log.stream.GetMsg(ctx, a.StreamSeq)
	if err != nil {
		r.cfg.Logger.Error("dead-letter: read original", "seq", a.StreamSeq, "err", err)
		return
	}
	r.deadLetterMsg(ctx, raw, a.Deliveries, reason)
	// No handler will answer for this input again: say so in the log, as
	// the in-process path does, or whatever waits on its outcome waits
	// forever.
	ev, _ := ParseMessage(raw.Subject, raw.Header, raw.Data, a.StreamSeq)
	failed, ok := r.failure(raw.Subject, ev, a.StreamSeq, a.Deliveries, "gave up after "+strconv.FormatUint(a.Deliveries, 10)+" deliveries: "+reason)
	if !ok {
		return
	}
	if err := r.publishFailure(ctx, failed, raw.Time); err != nil {
		r.cfg.Logger.Error("publish failed event", "stage", r.stage.Name(), "seq", a.StreamSeq, "err", err)
	}
}

// deadLetter copies the stream message at seq to the dead-letter stream.
// Its message id is derived from consumer and sequence, so the in-process
// path and the advisory path, in any number of processes, store it once.
func (r *Runner) deadLetter(ctx context.Context, seq, deliveries uint64, reason string) {
	raw, err := r.log.stream.GetMsg(ctx, seq)
	if err != nil {
		r.cfg.Logger.Error("dead-letter: read original", "seq", seq, "err", err)
		return
	}
	r.deadLetterMsg(ctx, raw, deliveries, reason)
}

// deadLetterMsg is deadLetter of a stream message already read.
func (r *Runner) deadLetterMsg(ctx context.Context, raw *jetstream.RawStreamMsg, deliveries uint64, reason string) {
	seq := raw.Sequence
	msg := nats.NewMsg(dlqPrefix(r.log.cfg) + "." + strings.TrimPrefix(raw.Subject, "t1."))
	msg.Data = raw.Data
	for k, v := range raw.Header {
		if k == jetstream.MsgIDHeader {
			continue
		}
		msg.Header[k] = v
	}
	msg.Header.Set(jetstream.MsgIDHeader, "dlq-"+r.cfg.Durable+"-"+strconv.FormatUint(seq, 10))
	msg.Header.Set(HeaderDeadReason, truncate(reason, 4096))
	msg.Header.Set(HeaderDeadConsumer, r.cfg.Durable)
	msg.Header.Set(HeaderDeadStreamSeq, strconv.FormatUint(seq, 10))
	msg.Header.Set(HeaderDeadDeliveries, strconv.FormatUint(deliveries, 10))
	msg.Header.Set(HeaderDeadSubject, raw.Subject)
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ack, err := r.log.js.PublishMsg(bctx, msg)
	if err != nil {
		r.cfg.Logger.Error("dead-letter: publish", "seq", seq, "err", err)
		return
	}
	if !ack.Duplicate {
		r.dead.Add(1)
		r.cfg.Logger.Warn("dead-lettered", "stage", r.stage.Name(), "seq", seq, "reason", reason)
	}
	r.lastErr.Delete(seq)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
