package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// toValue turns any JSON-marshalable Go value into a template value the
// way Python's json.loads would see its JSON text: objects keep their key
// order (a json.RawMessage or a struct keeps the order it is written in;
// a Go map is marshalled with sorted keys), numbers written without a
// fraction or exponent are integers, the rest floats.
func toValue(x any) (jinja.Value, error) {
	if v, ok := x.(jinja.Value); ok {
		return v, nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return jinja.Undefined(), err
	}
	return decodeJSON(buf.Bytes())
}

// decodeJSON decodes one JSON value, preserving object key order.
func decodeJSON(raw []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jinja.Undefined(), fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				// A repeated key keeps its first position and its last
				// value, as a Python dict built by json.loads does.
				d.AsDict().Set(k.(string), v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			_, err := dec.Token()
			return jinja.NewList(items), err
		}
		return jinja.Undefined(), fmt.Errorf("unexpected %v", t)
	case string:
		return jinja.NewString(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	case json.Number:
		return number(t)
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}

// number keeps integers integers, as json.loads does. Python's integers are
// unbounded and the engine's are 64-bit: a larger one is refused rather than
// rounded.
func number(n json.Number) (jinja.Value, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("integer %s does not fit in 64 bits", s)
		}
		return jinja.NewInt(i), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return jinja.Undefined(), fmt.Errorf("number %s is out of range", s)
	}
	return jinja.NewFloat(f), nil
}

// pythonFloat is Python's repr of a float, which json.dumps and str() both
// print: the shortest digits that round-trip, positional from 1e-4 up to
// 1e16 with at least one fractional digit, scientific outside that range
// with a signed exponent of at least two digits.
func pythonFloat(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	if a := math.Abs(f); a < 1e-4 || a >= 1e16 {
		s := strconv.FormatFloat(f, 'e', -1, 64) // 1e+16, 1.5e-05
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// engineFloat is how the engine prints a float, in {{ }} and in tojson.
func engineFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// checkValue refuses a float the engine would print differently from Python
// (in {{ }} and in tojson alike): one whose %g form is not its repr, as 1.0
// prints 1 and 1234567.0 prints 1.234567e+06. path names the value in the
// error.
func checkValue(v jinja.Value, path string) error {
	switch {
	case v.IsFloat():
		f := v.AsFloat()
		if py, eng := pythonFloat(f), engineFloat(f); py != eng {
			return fmt.Errorf("%s: the number %s would render as %s; write it as an integer or a string", path, py, eng)
		}
	case v.IsList():
		for i, item := range v.AsList().Items {
			if err := checkValue(item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case v.IsDict():
		d := v.AsDict()
		for _, k := range d.Keys {
			if err := checkValue(d.Data[k], path+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// anyString reports whether f holds for a string or a key inside v.
func anyString(v jinja.Value, f func(string) bool) bool {
	switch {
	case v.IsString():
		return f(v.AsString())
	case v.IsList():
		for _, item := range v.AsList().Items {
			if anyString(item, f) {
				return true
			}
		}
	case v.IsDict():
		d := v.AsDict()
		for _, k := range d.Keys {
			if f(k) || anyString(d.Data[k], f) {
				return true
			}
		}
	}
	return false
}
