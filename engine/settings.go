package engine

import (
	"fmt"
	"time"

	"github.com/t1pipe/t1/check"
)

// Settings configure how every stage consumes its events (engine in
// pipeline.yaml). They never feed event ids: a run digests the same
// whatever its workers' concurrency.
type Settings struct {
	// Concurrency is the number of handlers one process runs at once per
	// stage; a Serial stage always runs one.
	Concurrency int `yaml:"concurrency"`
	// MaxAckPending caps the unacknowledged messages of one stage across
	// every worker sharing its durable consumer. A worker asks for at most
	// twice its Concurrency, so N workers keep busy while MaxAckPending ≥
	// 2 × N × Concurrency; a Serial stage always has 1.
	MaxAckPending int `yaml:"max_ack_pending"`
	// AckWait is how long JetStream waits for an ack before redelivering.
	AckWait    time.Duration `yaml:"ack_wait"`
	MaxDeliver int           `yaml:"max_deliver"`
	// Backoff is the redelivery delay after each failed delivery; the last
	// entry repeats. Given to JetStream as a consumer's BackOff, entry n
	// replaces AckWait as the ack deadline of delivery n+1.
	Backoff []time.Duration `yaml:"backoff"`
	// Heartbeat is how often a busy handler tells JetStream it is still
	// working; it must be shorter than AckWait to prevent redelivery.
	Heartbeat time.Duration `yaml:"heartbeat"`
}

// DefaultSettings run four handlers per stage and process, with room for
// 32 such workers on one consumer.
func DefaultSettings() Settings {
	return Settings{
		Concurrency:   4,
		MaxAckPending: 256,
		AckWait:       30 * time.Second,
		MaxDeliver:    5,
		Backoff:       []time.Duration{time.Second, 5 * time.Second, 15 * time.Second},
		Heartbeat:     10 * time.Second,
	}
}

// Check reports every invalid setting.
func (s Settings) Check(r check.Report) {
	r.AtLeast("concurrency", s.Concurrency, 1)
	if s.Concurrency >= 1 && s.MaxAckPending < s.Concurrency {
		r("max_ack_pending", "must be at least concurrency (%d), or a worker never runs all its handlers; got %d", s.Concurrency, s.MaxAckPending)
	}
	r.Positive("ack_wait", s.AckWait)
	r.AtLeast("max_deliver", s.MaxDeliver, 1)
	for i, d := range s.Backoff {
		r.Positive(fmt.Sprintf("backoff[%d]", i), d)
	}
	// JetStream refuses a consumer with more back-off steps than deliveries.
	if len(s.Backoff) > s.MaxDeliver && s.MaxDeliver >= 1 {
		r("backoff", "has %d entries, more than engine.max_deliver (%d)", len(s.Backoff), s.MaxDeliver)
	}
	if s.Heartbeat <= 0 {
		r.Positive("heartbeat", s.Heartbeat)
	} else if s.AckWait > 0 && s.Heartbeat >= s.AckWait {
		r("heartbeat", "must be shorter than engine.ack_wait (%s), got %s", s.AckWait, s.Heartbeat)
	}
}

// Runner is the runner configuration of s for a pipeline whose stage
// configuration hashes to configHash.
func (s Settings) Runner(configHash string) RunnerConfig {
	return RunnerConfig{
		Concurrency:   s.Concurrency,
		MaxAckPending: s.MaxAckPending,
		AckWait:       s.AckWait,
		MaxDeliver:    s.MaxDeliver,
		Backoff:       s.Backoff,
		Heartbeat:     s.Heartbeat,
		ConfigHash:    configHash,
	}
}
