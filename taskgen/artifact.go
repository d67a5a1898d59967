package taskgen

import (
	"fmt"
	"sort"
	"strings"
)

// Kind is what an artifact holds, which decides the steps that can consume
// it.
type Kind string

// Artifact kinds.
const (
	Text    Kind = "text"    // a text file of lines
	CSV     Kind = "csv"     // a CSV file with a header row
	JSON    Kind = "json"    // a JSON array of flat objects
	Dir     Kind = "dir"     // a directory of files
	Archive Kind = "archive" // a .tar.gz of files
	Gzip    Kind = "gzip"    // one gzip-compressed file
	Script  Kind = "script"  // an executable shell script with known output
	Broken  Kind = "broken"  // a shell script with a known defect
	Repo    Kind = "repo"    // a git repository
	Value   Kind = "value"   // a small result file (a count, a hash, stats)
)

// fileKinds are the kinds that are one regular file a step can copy, hash
// or compress.
var fileKinds = []Kind{Text, CSV, JSON, Script, Value, Gzip, Archive}

// Artifact is a file or directory that exists once the solution has run up
// to some step, with the content the generator knows it has.
type Artifact struct {
	Path string
	Kind Kind
	// Data is the content of a single-file artifact.
	Data []byte
	// Header and Rows describe a CSV artifact; Numeric names its integer
	// columns and Category its low-cardinality string columns.
	Header   []string
	Rows     [][]string
	Numeric  []string
	Category []string
	// Records is a JSON artifact's array, field order kept; Key names the
	// field that identifies a record.
	Records []Record
	Key     string
	// Files is a directory's or archive's content, sorted by name.
	Files []File
	// Output is what a Script prints when run with no arguments.
	Output string
	// Producer is the index of the step that made it (-1: the environment).
	Producer int
	// Replaced says a later step changed or removed it: growth never
	// picks it as an input again.
	Replaced bool
	// FromEnv says the environment holds it before the agent starts, so
	// no assertion of the task checks it.
	FromEnv bool
}

// Name is the artifact's base name.
func (a *Artifact) Name() string { return a.Path[strings.LastIndexByte(a.Path, '/')+1:] }

// Lines splits a text artifact into its lines, without terminators.
func (a *Artifact) Lines() []string {
	s := strings.TrimSuffix(string(a.Data), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// Field is one key and value of a JSON record; Value is a string, an int or
// a bool.
type Field struct {
	Key   string
	Value any
}

// Record is a flat JSON object whose key order is kept, so rendered files
// are byte-stable.
type Record []Field

// Get returns the value of key, or nil.
func (r Record) Get(key string) any {
	for _, f := range r {
		if f.Key == key {
			return f.Value
		}
	}
	return nil
}

// File is one file of a directory, an archive or the environment.
type File struct {
	Path string // relative to the directory, or absolute for the environment
	Data []byte
	Mode uint32 // permission bits; 0 means 0644
	// Source is the absolute path of the file this one is a copy of. Checks
	// compare copies with the live source at verify time, so they hold
	// whatever byte-level form an agent gave a file that is checked only
	// for its meaning (a JSON document, say).
	Source string
}

func (f File) mode() uint32 {
	if f.Mode == 0 {
		return 0o644
	}
	return f.Mode
}

func sortFiles(fs []File) {
	sort.Slice(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
}

// renderCSV writes header and rows with plain commas: the generator never
// produces a field that needs quoting.
func renderCSV(header []string, rows [][]string) []byte {
	var b strings.Builder
	b.WriteString(strings.Join(header, ","))
	b.WriteByte('\n')
	for _, r := range rows {
		b.WriteString(strings.Join(r, ","))
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// renderJSON writes records as an indented JSON array in key order.
func renderJSON(recs []Record) []byte {
	var b strings.Builder
	b.WriteString("[\n")
	for i, r := range recs {
		b.WriteString("  {")
		for j, f := range r {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s: %s", quote(f.Key), jsonValue(f.Value))
		}
		b.WriteString("}")
		if i < len(recs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return []byte(b.String())
}

func jsonValue(v any) string {
	switch v := v.(type) {
	case string:
		return quote(v)
	case int:
		return fmt.Sprint(v)
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	panic(fmt.Sprintf("synth: unsupported JSON value %T", v))
}
