package verifier

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// ParseJUnit reads a JUnit XML report as pytest --junitxml writes it
// (<testsuites><testsuite><testcase classname name>, with <failure>,
// <error> or <skipped> children; xunit1 or xunit2), and also a bare
// <testsuite> root and nested suites. Each <testcase> is one assertion
// named "classname::name" (just name when classname is empty). A failure
// wins over an error (pytest adds a teardown <error> to a test that already
// failed), either wins over skipped; no child means passed. The message is
// the element's message attribute, else the first line of its text.
func ParseJUnit(data []byte) ([]Assertion, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%d bytes, over the %d-byte limit", len(data), MaxFileBytes)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.CharsetReader = charsetReader
	var (
		out      []Assertion
		cur      *Assertion
		curRank  int
		inResult bool // inside the <failure>/<error>/<skipped> that set cur's status
		text     strings.Builder
		sawRoot  bool
		depth    int
	)
	rank := map[string]int{"skipped": 1, "error": 2, "failure": 3}
	status := map[string]Status{"skipped": Skipped, "error": Error, "failure": Failed}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not JUnit XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth > 64 {
				return nil, errors.New("elements nested more than 64 deep")
			}
			name := t.Name.Local
			if depth == 1 {
				if name != "testsuites" && name != "testsuite" {
					return nil, fmt.Errorf("root element is <%s>, want <testsuites> or <testsuite>", bound(name, 64))
				}
				sawRoot = true
			}
			switch {
			case name == "testcase":
				if cur != nil {
					return nil, errors.New("<testcase> inside <testcase>")
				}
				if len(out) >= MaxAssertions {
					return nil, fmt.Errorf("more than %d test cases", MaxAssertions)
				}
				cls, n := attr(t, "classname"), attr(t, "name")
				full := n
				if cls != "" {
					full = cls + "::" + n
				}
				if full == "" {
					full = fmt.Sprintf("testcase #%d", len(out)+1)
				}
				cur = &Assertion{Name: bound(full, MaxNameBytes), Status: Passed}
				curRank = 0
			case cur != nil && rank[name] > 0 && depth >= 2:
				if rank[name] > curRank {
					curRank = rank[name]
					cur.Status = status[name]
					cur.Message = bound(attr(t, "message"), MaxMessageBytes)
					inResult = true
					text.Reset()
				}
			}
		case xml.CharData:
			if inResult && text.Len() < MaxMessageBytes {
				text.Write(t[:min(len(t), MaxMessageBytes)])
			}
		case xml.EndElement:
			depth--
			switch t.Name.Local {
			case "testcase":
				if cur != nil {
					out = append(out, *cur)
					cur = nil
				}
			case "failure", "error", "skipped":
				if inResult {
					if cur.Message == "" {
						line, _, _ := strings.Cut(strings.TrimSpace(text.String()), "\n")
						cur.Message = bound(line, MaxMessageBytes)
					} else if cur.Message == collectionFailure {
						if e := lastErrorLine(text.String()); e != "" {
							cur.Message = bound(collectionFailure+": "+e, MaxMessageBytes)
						}
					}
					inResult = false
				}
			}
		}
	}
	if !sawRoot {
		return nil, errors.New("no <testsuites> or <testsuite> element")
	}
	return mergeDuplicates(out), nil
}

// collectionFailure is pytest's message for a test file it could not
// import; the exception (the module that is missing) is in the text.
const collectionFailure = "collection failure"

// lastErrorLine is the last "E   …" line of a pytest traceback.
func lastErrorLine(trace string) string {
	var last string
	for _, l := range strings.Split(trace, "\n") {
		if rest, ok := strings.CutPrefix(l, "E "); ok {
			last = strings.TrimSpace(rest)
		}
	}
	return last
}

// statusRank orders outcomes from best to worst for merging.
var statusRank = map[Status]int{Passed: 0, Skipped: 1, Error: 2, Failed: 3}

// mergeDuplicates folds repeated names into one assertion with the worst
// outcome: pytest reports a teardown error as a second <testcase> with the
// test's own name, and a test is one assertion however many phases fail.
func mergeDuplicates(as []Assertion) []Assertion {
	idx := make(map[string]int, len(as))
	out := as[:0]
	for _, a := range as {
		i, ok := idx[a.Name]
		if !ok {
			idx[a.Name] = len(out)
			out = append(out, a)
			continue
		}
		if statusRank[a.Status] > statusRank[out[i].Status] {
			out[i] = a
		}
	}
	return out
}

func attr(t xml.StartElement, name string) string {
	for _, a := range t.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// charsetReader accepts the encodings a JUnit writer declares in practice:
// UTF-8 (pytest), ASCII, and ISO-8859-1.
func charsetReader(label string, in io.Reader) (io.Reader, error) {
	switch strings.ToLower(label) {
	case "utf-8", "utf8", "us-ascii", "ascii":
		return in, nil
	case "iso-8859-1", "latin1", "latin-1":
		data, err := io.ReadAll(io.LimitReader(in, MaxFileBytes))
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for _, c := range data {
			b.WriteRune(rune(c))
		}
		return strings.NewReader(b.String()), nil
	}
	if !utf8.ValidString(label) {
		label = "?"
	}
	return nil, fmt.Errorf("unsupported encoding %q", bound(label, 64))
}
