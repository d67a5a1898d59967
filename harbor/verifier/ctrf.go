package verifier

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

type ctrfDoc struct {
	Results *struct {
		Tests *[]ctrfTest `json:"tests"`
	} `json:"results"`
}

type ctrfTest struct {
	Name    json.RawMessage `json:"name"`
	Status  json.RawMessage `json:"status"`
	Message json.RawMessage `json:"message"`
	Trace   json.RawMessage `json:"trace"`
}

// ParseCTRF reads a CTRF JSON report (ctrf.io: results.tests[] with name,
// status, message, trace), as pytest-json-ctrf writes it. Statuses map
// passed→passed, failed→failed, skipped and pending→skipped, other (and
// anything unknown)→error. A test's message is its message, or else the
// first line of its trace, bounded to MaxMessageBytes.
func ParseCTRF(data []byte) ([]Assertion, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%d bytes, over the %d-byte limit", len(data), MaxFileBytes)
	}
	var doc ctrfDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not CTRF JSON: %w", err)
	}
	if doc.Results == nil {
		return nil, errors.New(`no "results" object`)
	}
	if doc.Results.Tests == nil {
		return nil, errors.New(`no "results.tests" array`)
	}
	tests := *doc.Results.Tests
	if len(tests) > MaxAssertions {
		return nil, fmt.Errorf("%d tests, over the limit of %d", len(tests), MaxAssertions)
	}
	out := make([]Assertion, 0, len(tests))
	for i, t := range tests {
		name, err := jsonString(t.Name)
		if err != nil {
			return nil, fmt.Errorf("results.tests[%d].name: %w", i, err)
		}
		if name == "" {
			name = fmt.Sprintf("test #%d", i+1)
		}
		status, err := jsonString(t.Status)
		if err != nil {
			return nil, fmt.Errorf("results.tests[%d].status: %w", i, err)
		}
		msg, err := jsonString(t.Message)
		if err != nil {
			return nil, fmt.Errorf("results.tests[%d].message: %w", i, err)
		}
		if msg == "" {
			trace, _ := jsonString(t.Trace)
			msg, _, _ = strings.Cut(strings.TrimSpace(trace), "\n")
		}
		a := Assertion{Name: bound(name, MaxNameBytes), Message: bound(msg, MaxMessageBytes)}
		switch strings.ToLower(status) {
		case "passed":
			a.Status = Passed
		case "failed":
			a.Status = Failed
		case "skipped", "pending":
			a.Status = Skipped
		case "other":
			a.Status = Error
		case "":
			return nil, fmt.Errorf("results.tests[%d] (%s): no status", i, a.Name)
		default:
			a.Status = Error
			if a.Message == "" {
				a.Message = bound("unknown CTRF status "+status, MaxMessageBytes)
			}
		}
		out = append(out, a)
	}
	return mergeDuplicates(out), nil
}

// jsonString accepts a JSON string, or null / absent as "".
func jsonString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("want a string")
	}
	return s, nil
}
