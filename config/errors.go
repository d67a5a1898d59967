package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

var (
	configType   = reflect.TypeFor[Config]()
	durationType = reflect.TypeFor[time.Duration]()
	errStop      = errors.New("stop walking")
)

// problem is one invalid setting, named by its key path ("engine.heartbeat",
// "engine.backoff[1]").
type problem struct {
	path string
	msg  string
}

func (p problem) String() string { return p.path + ": " + p.msg }

// mismatch is a value that does not fit the Go type of its key: the error
// that checkScalars finds and that goccy's type errors are translated into.
type mismatch struct {
	node ast.Node
	path string
	want reflect.Type
}

func (m *mismatch) Error() string {
	path := m.path
	if path == "" {
		path = "top level"
	}
	return fmt.Sprintf("%s: want %s, got %s", path, describeType(m.want), describeNode(m.node))
}

// walk calls fn for n and, following the Go type t, for every node below it
// that decodes into a known struct field or a list item. key is the token of
// the mapping key that holds n, or nil. Returning errStop ends the walk
// without an error.
func walk(n ast.Node, t reflect.Type, fn func(n ast.Node, key *token.Token, t reflect.Type, path string) error) error {
	var visit func(n ast.Node, key *token.Token, t reflect.Type, path string) error
	visit = func(n ast.Node, key *token.Token, t reflect.Type, path string) error {
		n = unwrap(n)
		if n == nil {
			return nil
		}
		if err := fn(n, key, t, path); err != nil {
			return err
		}
		switch t.Kind() {
		case reflect.Struct:
			for _, mv := range entries(n) {
				name, ok := keyName(mv)
				if !ok {
					continue
				}
				if f, ok := field(t, name); ok {
					if err := visit(mv.Value, mv.Key.GetToken(), f.Type, join(path, name)); err != nil {
						return err
					}
				}
			}
		case reflect.Slice:
			if seq, ok := n.(*ast.SequenceNode); ok {
				for i, v := range seq.Values {
					if err := visit(v, nil, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	err := visit(n, nil, t, "")
	if err == errStop {
		return nil
	}
	return err
}

// checkScalars finds the mismatches goccy lets through, reports without a
// position or fails on: a duration that does not parse, a fraction where an
// integer is wanted (goccy truncates it), a number too large for its integer
// (goccy reads one past the uint64 range as a string and wraps it), a
// non-list where a list is wanted and a tag with no value.
func checkScalars(body ast.Node) error {
	return walk(body, configType, func(n ast.Node, _ *token.Token, t reflect.Type, path string) error {
		s, isString := n.(*ast.StringNode)
		bad := false
		switch {
		case t == durationType && isString:
			_, err := time.ParseDuration(s.Value)
			bad = err != nil
		case isInteger(t) && n.Type() == ast.FloatType:
			bad = true
		case isInteger(t) && isString:
			var err error
			if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
				_, err = strconv.ParseUint(s.Value, 0, t.Bits())
			} else {
				_, err = strconv.ParseInt(s.Value, 0, t.Bits())
			}
			bad = err != nil
		}
		// goccy panics decoding a tagged non-list into a list, and its own
		// error for an untagged one is no better.
		if t.Kind() == reflect.Slice && n.Type() != ast.SequenceType && n.Type() != ast.NullType {
			bad = true
		}
		if _, ok := n.(*ast.TagNode); ok {
			bad = true // a tag on nothing
		}
		if bad {
			return &mismatch{node: n, path: path, want: t}
		}
		return nil
	})
}

// decodeError turns a parse or decode error into one line that starts with
// name:line:col and names the key path, with a suggestion for a misspelt key.
func decodeError(name string, body ast.Node, err error) error {
	var m *mismatch
	if errors.As(err, &m) {
		return at(name, m.node.GetToken(), m.Error())
	}
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return fmt.Errorf("%s: %w", name, err)
	}
	tok := ye.GetToken()
	var syntax *yaml.SyntaxError
	if errors.As(err, &syntax) {
		return at(name, tok, "invalid YAML: "+ye.GetMessage())
	}
	if tok == nil || body == nil {
		return at(name, tok, ye.GetMessage())
	}

	// goccy picks one of a section's unknown keys at random; report the
	// first in the file instead, so the same file always gets the same error.
	_, wantUnknown := errors.AsType[*yaml.UnknownFieldError](err)

	// Find what the token belongs to: an unknown key of a section, or a value.
	var msg string
	_ = walk(body, configType, func(n ast.Node, _ *token.Token, t reflect.Type, path string) error {
		if wantUnknown && t.Kind() == reflect.Struct {
			for _, mv := range entries(n) {
				if name, ok := keyName(mv); ok {
					if _, known := field(t, name); !known {
						tok = mv.Key.GetToken()
						msg = unknownKey(name, path, t)
						return errStop
					}
				}
			}
			return nil
		}
		if !wantUnknown && n.GetToken() == tok {
			msg = (&mismatch{node: n, path: path, want: t}).Error()
			return errStop
		}
		return nil
	})
	if msg == "" {
		// Keys reached through a merge key ("<<") are not walked.
		msg = strings.Replace(ye.GetMessage(), "unknown field", "unknown key", 1)
	}
	return at(name, tok, msg)
}

func unknownKey(key, section string, t reflect.Type) string {
	where := ""
	if section != "" {
		where = " in " + section
	}
	known := keys(t)
	if s := suggest(key, known); s != "" {
		return fmt.Sprintf("unknown key %q%s (did you mean %q?)", key, where, s)
	}
	return fmt.Sprintf("unknown key %q%s; known keys: %s", key, where, strings.Join(known, ", "))
}

// positioned places each validation problem at the value of its key, or at
// the nearest enclosing key present in the file, one line each.
func positioned(name string, body ast.Node, probs []problem) error {
	errs := make([]error, 0, len(probs))
	for _, p := range probs {
		var tok *token.Token
		for path := p.path; path != "" && tok == nil; path = parent(path) {
			_ = walk(body, configType, func(n ast.Node, key *token.Token, _ reflect.Type, here string) error {
				if here != path {
					return nil
				}
				tok = key
				if _, scalar := n.(ast.ScalarNode); (scalar && n.Type() != ast.NullType) || key == nil {
					tok = n.GetToken()
				}
				return errStop
			})
		}
		errs = append(errs, at(name, tok, p.String()))
	}
	return errors.Join(errs...)
}

// at formats one problem as a single line; goccy's messages may span lines.
func at(name string, tok *token.Token, msg string) error {
	msg = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(msg)
	if tok == nil {
		return fmt.Errorf("%s: %s", name, msg)
	}
	return fmt.Errorf("%s:%d:%d: %s", name, tok.Position.Line, tok.Position.Column, msg)
}

// parent drops the last element of a key path: "a.b[2]" → "a.b" → "a" → "".
func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// unwrap looks through anchors and tags to the value they decorate. A tag
// on nothing is kept, for checkScalars to reject.
func unwrap(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			if v.Value == nil || v.Value.Type() == ast.NullType {
				return n
			}
			n = v.Value
		default:
			return n
		}
	}
}

func entries(n ast.Node) []*ast.MappingValueNode {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v.Values
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}
	}
	return nil
}

// keyName returns the key of a mapping entry; merge keys have none.
func keyName(mv *ast.MappingValueNode) (string, bool) {
	if mv.Key == nil || mv.Key.IsMergeKey() {
		return "", false
	}
	if s, ok := mv.Key.(*ast.StringNode); ok {
		return s.Value, true
	}
	if tok := mv.Key.GetToken(); tok != nil {
		return tok.Value, true
	}
	return "", false
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

func field(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && yamlName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keys lists the yaml keys of struct type t in declaration order.
func keys(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && yamlName(f) != "" {
			names = append(names, yamlName(f))
		}
	}
	return names
}

func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func describeType(t reflect.Type) string {
	switch {
	case t == durationType:
		return `a duration such as "30s" or "10m"`
	case t.Kind() == reflect.Slice && t.Elem() == durationType:
		return "a list of durations such as [1s, 5s]"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list"
	case reflect.Struct:
		return "a mapping with keys " + strings.Join(keys(t), ", ")
	}
	return t.String()
}

func describeNode(n ast.Node) string {
	switch n.Type() {
	case ast.MappingType:
		return "a mapping"
	case ast.SequenceType:
		return "a list"
	case ast.NullType:
		return "nothing"
	case ast.StringType:
		if s, ok := n.(*ast.StringNode); ok {
			return quote(s.Value)
		}
	}
	s := strings.TrimSpace(n.String())
	if !strings.ContainsAny(s, "\r\n") && len(s) <= maxShown {
		return s
	}
	return quote(s)
}

// maxShown bounds how much of a value an error message repeats.
const maxShown = 40

// quote quotes s for an error message, on one line and shortened.
func quote(s string) string {
	if r := []rune(s); len(r) > maxShown {
		s = string(r[:maxShown]) + "..."
	}
	return strconv.Quote(s)
}

// suggest returns the known key closest to key, or "" when none is close
// enough to be a plausible misspelling. Case, '_' and '-' are ignored, so
// camelCase spellings of snake_case keys are caught too.
func suggest(key string, known []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	best, bestDist := "", 3 // more than two edits is a different word
	for _, k := range known {
		d := distance(norm(key), norm(k))
		if d < bestDist && d < len([]rune(k)) {
			best, bestDist = k, d
		}
	}
	return best
}

// distance is the optimal string alignment distance: insertions, deletions,
// substitutions and transpositions of adjacent runes each cost one, the
// usual shape of a typo.
func distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// d[i][j] is the distance between s[:i] and t[:j].
	d := make([][]int, len(s)+1)
	for i := range d {
		d[i] = make([]int, len(t)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(s); i++ {
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(s)][len(t)]
}
