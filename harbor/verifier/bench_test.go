package verifier

import (
	"fmt"
	"strings"
	"testing"
)

// Reports of 1000 tests, a tenth of them failing with a 300-byte message.
func benchReports() (ctrf, junit []byte) {
	var c, j strings.Builder
	c.WriteString(`{"results": {"tool": {"name": "pytest"}, "tests": [`)
	j.WriteString(`<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">`)
	msg := strings.Repeat("assert x == y ", 20)
	for i := range 1000 {
		if i > 0 {
			c.WriteString(",")
		}
		if i%10 == 0 {
			fmt.Fprintf(&c, `{"name": "test_outputs.py::test_%d", "status": "failed", "message": %q, "duration": 1}`, i, msg)
			fmt.Fprintf(&j, `<testcase classname="test_outputs" name="test_%d" time="0.001"><failure message="%s">trace</failure></testcase>`, i, msg)
		} else {
			fmt.Fprintf(&c, `{"name": "test_outputs.py::test_%d", "status": "passed", "duration": 1}`, i)
			fmt.Fprintf(&j, `<testcase classname="test_outputs" name="test_%d" time="0.001" />`, i)
		}
	}
	c.WriteString(`]}}`)
	j.WriteString(`</testsuite></testsuites>`)
	return []byte(c.String()), []byte(j.String())
}

func BenchmarkParseCTRF(b *testing.B) {
	data, _ := benchReports()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if as, err := ParseCTRF(data); err != nil || len(as) != 1000 {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseJUnit(b *testing.B) {
	_, data := benchReports()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if as, err := ParseJUnit(data); err != nil || len(as) != 1000 {
			b.Fatal(err)
		}
	}
}
