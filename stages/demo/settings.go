package demo

import "github.com/t1pipe/t1/check"

// Settings size the demo pipeline of `t1 demo` (stages.demo in
// pipeline.yaml).
type Settings struct {
	// Count is the events the producer emits.
	Count int `yaml:"count"`
	// PayloadBytes is the size of the object each event claims.
	PayloadBytes int `yaml:"payload_bytes"`
}

// DefaultSettings are 200 blobs of 4 KiB.
func DefaultSettings() Settings { return Settings{Count: 200, PayloadBytes: 4096} }

// Check reports every invalid setting.
func (s Settings) Check(r check.Report) {
	r.AtLeast("count", s.Count, 1)
	if s.PayloadBytes < 0 {
		r("payload_bytes", "must not be negative, got %d", s.PayloadBytes)
	}
}
