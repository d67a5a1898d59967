// Package engine is t1's event machinery: the event envelope, the event log
// on JetStream, the stage runner, dead letters, queries of the log, replay
// and the trace context that follows events.
//
// # Events
//
// An event is a small JSON envelope (id, type, run, time, causation id,
// correlation id, schema version, payload) published on subject
//
//	t1.<run>.<type>            e.g. t1.nightly-07.task.audited
//
// into one Limits-retention stream (default T1) on file storage, so the log
// is kept for replay rather than drained by consumers. Bulk data never rides
// on events: an event carries object keys, row counts and hashes (a claim
// check).
//
// # Exactly-once effects
//
// Event ids are derived from their cause (DeriveID: run, type, causing
// event, stage config hash, sibling key) and sent as Nats-Msg-Id, which the
// stream deduplicates within its window. A handler's emitted events are held
// until it returns; the runner then publishes them, waits for every
// acknowledgement, and only then double-acks the input. A crash anywhere in
// between leads to a redelivery that emits the same ids again, which the
// stream drops. Redelivery therefore never duplicates output, as long as
// handlers are deterministic. The stream remembers ids only for its dedup
// window (default 10 minutes); for an input older than half the window (a
// redelivery after a long outage, a re-created consumer) the runner does not
// rely on it: it reads the ids already stored on the outputs' subjects and
// publishes only the outputs that are missing.
//
// # Pulling
//
// The runner pulls with Fetch requests (2 s server heartbeats) against 2 ×
// Concurrency tokens, one per message handled, asked for or held: it asks
// for every free token once half are free, or for any free token when no
// request is alive, so a free worker never waits while the server has
// work, and a re-pull never depends on a heartbeat check expiring. A pull
// that ends with an error (consumer deleted, heartbeats missing) makes the
// runner re-create the consumer.
//
// Any number of processes running one stage share its durable consumer;
// MaxAckPending bounds what is out across all of them (Settings, the
// engine section of pipeline.yaml). A message pulled ahead of a free
// handler is kept in progress while it waits, so the server never hands
// it to a second process. A Serial stage's consumer lets one message out
// at a time; the processes that run one hold its Lease, so no two fold
// one run. RunnerConfig.Run scopes a runner to one run: its consumer
// (Durable(stage, run)) filters that run's subjects alone, so processes
// of different runs fold at once. RunnerConfig.From starts a new consumer
// at a stream sequence rather than the beginning of the log, and
// Chain.Only narrows a stage to the events that descend from one root
// (ChainOf reads them from the log), so a job doing one piece of a run's
// work (an evaluation) handles that alone. Lease names are paths, and a lease
// excludes those above and below it: a holder of a stage over every run
// and one of that stage for one run never run at once.
//
// # Failure
//
//	handler error ──▶ retried in process (RetryBudget, exponential back-off)
//	      │ still failing
//	      ▼
//	nak with delay (Backoff[delivery-1]) ──▶ redelivered … up to MaxDeliver
//	      │ last delivery fails, or the server gives up (MAX_DELIVERIES advisory)
//	      ▼
//	copied to the dead-letter stream (default T1_DLQ, subjects t1dlq.<run>.<type>)
//	with headers T1-Dead-Reason, -Consumer, -Stream-Seq, -Deliveries, -Subject,
//	and <type>.failed published ("gave up after N deliveries: …"), so
//	whatever waits on the input's outcome is told
//
// A Permanent error skips all of that: the runner publishes
// <type>.failed (payload Failure) and terminates the message. An output
// larger than the server's max payload is such an error.
//
// # Outages
//
// A stage outlives its server: connections reconnect forever, publish
// acknowledgements are awaited for a bounded time (the input is then
// retried, its output ids deduplicated), and a consumer lost under a
// running stage (server restarted, consumer deleted) is re-created with
// back-off. A stage filtering one event type uses the single filter
// subject and runs on nats-server 2.9; several types need 2.10.
//
// # Queries and replay
//
// What is known about the log comes from the Log, never from callers
// rebuilding subjects: EventCounts and DeadLetterCounts count one run's (or
// every run's) events and dead letters by type from the streams'
// per-subject totals, one request however long the log; Runs lists the
// runs with events; HasEvent looks one subject up.
//
// Log.Replay reads subject filters from a sequence or a time with an
// ordered consumer, leaving no state on the server; Follow keeps reading.
// ReplayRun reads one run's events of some types, filtered by the server,
// which is how the stages that fold the log (control, eval) rebuild a run
// the first time they meet it: the cost is that run's, however many others
// the log holds. WithReadHook observes what a handle's replays read.
// StartEvent and LastEvent look one run's run.started and latest event up
// by subject.
//
// # Branches
//
// Branch and BranchEvents hand a run's past events to a stage as events of
// a new run (a branch) and publish what it emits there, with ids derived
// from the branch; the source run is never written to. A branch's
// run.started names its parent (payload field "parent"); Lineage follows
// those names from a run to the root, which is the order in which stages
// look for an artifact a branch did not make itself.
//
// # Tracing
//
// Publish injects the caller's trace context (W3C traceparent, tracestate,
// baggage) into the event's headers through HeaderCarrier and the global
// otel propagator; the runner extracts it and starts the handler's span as
// its child, so one trace follows an event through every stage. Until the
// propagator is set up (infra/telemetry) both do nothing.
package engine
