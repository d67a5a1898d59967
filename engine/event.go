package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// Event is the envelope every stage consumes and publishes. Events are small
// facts; bulk data lives in the object store and events carry its keys.
type Event struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Run  string `json:"run"`
	// Time is when the event was first published. It is informative only:
	// artifacts must never depend on it, or replays would differ.
	Time time.Time `json:"time"`
	// CausationID is the id of the event this one reacts to; empty for
	// events that start a run.
	CausationID string `json:"causation_id,omitempty"`
	// CorrelationID is the id of the root event of the chain.
	CorrelationID string `json:"correlation_id,omitempty"`
	// SchemaVersion is the version of Payload's schema.
	SchemaVersion int             `json:"schema_version"`
	Payload       json.RawMessage `json:"payload,omitempty"`

	// Seq is the stream sequence the event was read at; zero before publish.
	Seq uint64 `json:"-"`
}

// Subject is where an event of this run and type is published.
func Subject(run, typ string) string { return "t1." + run + "." + typ }

// SubjectFilter matches events of typ in every run.
func SubjectFilter(typ string) string { return "t1.*." + typ }

// Subject of the event.
func (e Event) Subject() string { return Subject(e.Run, e.Type) }

// Decode unmarshals the payload into v.
func (e Event) Decode(v any) error {
	if len(e.Payload) == 0 {
		return Permanent(fmt.Errorf("event %s (%s) has no payload", e.ID, e.Type))
	}
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return Permanent(fmt.Errorf("event %s (%s): payload: %w", e.ID, e.Type, err))
	}
	return nil
}

var typeRe = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// ValidType reports whether typ is a dotted lower-case event type.
func ValidType(typ string) error {
	if !typeRe.MatchString(typ) {
		return fmt.Errorf("event type %q: want dotted lower-case words, e.g. task.audited", typ)
	}
	return nil
}

// DeriveID computes an event id from its cause, so that re-running the same
// work (a redelivery, a restarted process) yields the same id, which the
// stream then deduplicates through Nats-Msg-Id. parts are the cause: the new
// event's run and type, the causing event's id, the emitting stage's config
// hash and a key distinguishing siblings (an attempt number, a task id).
func DeriveID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		// Length-prefixing keeps ("ab","c") and ("a","bc") apart.
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// NewRootEvent builds an event that starts a chain (no causation), with an
// id derived from run, type and key.
func NewRootEvent(run, typ, key string, payload any) (Event, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return Event{}, fmt.Errorf("event %s: payload: %w", typ, err)
	}
	id := DeriveID(run, typ, "", "", key)
	return Event{ID: id, Type: typ, Run: run, CorrelationID: id, SchemaVersion: 1, Payload: raw}, nil
}

// FailedType is the type of the event published when handling typ fails
// permanently.
func FailedType(typ string) string { return typ + ".failed" }

// Failure is the payload of a <type>.failed event.
type Failure struct {
	Stage    string `json:"stage"`
	EventID  string `json:"event_id"`
	Type     string `json:"type"`
	Reason   string `json:"reason"`
	Attempts int    `json:"attempts"`
}
