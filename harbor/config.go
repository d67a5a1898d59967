package harbor

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
)

// Harbor's documented defaults for keys a task.toml leaves out.
const (
	DefaultVerifierTimeout = 600 * time.Second
	DefaultBuildTimeout    = 600 * time.Second
	DefaultCPUs            = 1
	DefaultMemoryMB        = 2048
	DefaultStorageMB       = 10240
)

// Difficulties are the values [metadata] difficulty may take: Terminal-Bench's
// three, and "unknown", which Harbor-format generators write for unrated tasks.
var Difficulties = []string{"easy", "medium", "hard", "unknown"}

// Config is the typed view of task.toml. Only the keys t1 reads are typed;
// every other key (Harbor's [task] package section, [solution.env],
// artifacts, mcp_servers, healthchecks, …) is kept verbatim so that a
// read→write round trip loses nothing.
//
// Zero values mean "not set": Harbor's default applies and the key is not
// written. Marshal returns the original bytes, comments included, while the
// typed fields are unchanged since parsing; after an edit it re-emits the
// document in a canonical layout (sections in Harbor's order, keys sorted)
// in which comments are not kept.
type Config struct {
	// SchemaVersion is "version" (Terminal-Bench 2, Harbor 1.0) or
	// "schema_version" (Harbor 1.1 and later), whichever the file uses.
	SchemaVersion string
	Metadata      Metadata
	Verifier      VerifierConfig
	Agent         AgentConfig
	Environment   EnvironmentConfig

	services   []Service      // [[verifier.services]], read-only (Services)
	versionKey string         // "version" or "schema_version"
	memoryKey  string         // "memory" (deprecated "2G" form) or "memory_mb"
	storageKey string         // "storage" or "storage_mb"
	doc        map[string]any // the whole parsed document
	src        []byte         // the file as read
	orig       *Config        // typed fields as parsed, to detect edits
}

// Metadata is [metadata].
type Metadata struct {
	AuthorName            string
	AuthorEmail           string
	Difficulty            string
	Category              string
	Tags                  []string
	ExpertTimeEstimateMin float64
	JuniorTimeEstimateMin float64
}

// VerifierConfig is [verifier].
type VerifierConfig struct {
	TimeoutSec float64
	Env        map[string]string
}

// AgentConfig is [agent].
type AgentConfig struct {
	TimeoutSec float64
}

// EnvironmentConfig is [environment]. MemoryMB and StorageMB are read from
// memory_mb/storage_mb or from the deprecated memory/storage size strings
// ("2G", "512M", "10 GB"); when both are present the size string wins, as
// in Harbor.
type EnvironmentConfig struct {
	BuildTimeoutSec float64
	DockerImage     string
	CPUs            float64
	MemoryMB        int64
	StorageMB       int64
	GPUs            int64
	AllowInternet   *bool
}

// Service is one [[verifier.services]] entry, t1's extension of the
// format: a service the task's tests talk to, which the solution or agent
// set up and started and which the verifier's fresh sandbox starts again
// from the attempt's files before test.sh (package trial). Command is run
// by bash in the image's WORKDIR with the verifier's environment; it may
// stay in the foreground or daemonize. Port, when set, is a TCP port on
// 127.0.0.1 the verifier waits for (30 s) before test.sh starts.
type Service struct {
	Command string
	Port    int
}

// MaxServices bounds [[verifier.services]].
const MaxServices = 16

// Services is [[verifier.services]], in order; nil when the task declares
// none. Services are read, not edited: Marshal keeps them as written.
func (c *Config) Services() []Service { return slices.Clone(c.services) }

// services decodes [[verifier.services]]: an array of tables of a
// non-empty command and an optional port in 1…65535, and nothing else.
func (d *decoder) services(v any) []Service {
	const field = "[[verifier.services]]"
	arr, ok := v.([]map[string]any)
	if !ok {
		if anys, isAny := v.([]any); isAny {
			for _, e := range anys {
				t, isT := e.(map[string]any)
				if !isT {
					d.fail(field, "want tables of command and port, got %s", typeName(e))
					return nil
				}
				arr = append(arr, t)
			}
		} else {
			d.fail(field, "want an array of tables of command and port, got %s", typeName(v))
			return nil
		}
	}
	if len(arr) > MaxServices {
		d.fail(field, "%d services, at most %d", len(arr), MaxServices)
		return nil
	}
	out := make([]Service, 0, len(arr))
	for i, t := range arr {
		for k := range t {
			if k != "command" && k != "port" {
				d.fail(field, "entry %d: unknown key %q: want command and port", i+1, k)
			}
		}
		sv := Service{Command: strings.TrimSpace(d.str(t, "verifier.services", "command"))}
		if sv.Command == "" {
			d.fail(field, "entry %d: command is missing or empty", i+1)
		}
		if p := d.integer(t, "verifier.services", "port"); p > 65535 || (p == 0 && t["port"] != nil) {
			d.fail(field, "entry %d: port %d: want 1…65535", i+1, p)
		} else {
			sv.Port = int(p)
		}
		out = append(out, sv)
	}
	return out
}

// VerifierTimeout is [verifier] timeout_sec, or Harbor's default.
func (c *Config) VerifierTimeout() time.Duration {
	return secOr(c.Verifier.TimeoutSec, DefaultVerifierTimeout)
}

// AgentTimeout is [agent] timeout_sec; zero means no limit was set.
func (c *Config) AgentTimeout() time.Duration { return secOr(c.Agent.TimeoutSec, 0) }

// BuildTimeout is [environment] build_timeout_sec, or Harbor's default.
func (c *Config) BuildTimeout() time.Duration {
	return secOr(c.Environment.BuildTimeoutSec, DefaultBuildTimeout)
}

func secOr(s float64, def time.Duration) time.Duration {
	if s <= 0 {
		return def
	}
	return time.Duration(s * float64(time.Second))
}

// FieldError is a task.toml problem tied to one key. Line and Column are
// set for syntax errors.
type FieldError struct {
	File   string // "task.toml"
	Field  string // "[environment] cpus", or "" for a syntax error
	Line   int
	Column int
	Msg    string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// ParseConfig parses task.toml. Errors are *FieldError naming the key (or
// the line and column of a syntax error).
func ParseConfig(data []byte) (*Config, error) {
	if !utf8.Valid(data) {
		off := invalidUTF8Offset(data)
		line := bytes.Count(data[:off], []byte("\n")) + 1
		return nil, &FieldError{File: ConfigFile, Line: line, Column: off - bytes.LastIndexByte(data[:off], '\n'), Msg: "not valid UTF-8"}
	}
	doc := map[string]any{}
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, &FieldError{File: ConfigFile, Line: row, Column: col, Msg: strings.TrimPrefix(de.Error(), "toml: ")}
		}
		return nil, &FieldError{File: ConfigFile, Msg: err.Error()}
	}
	c := &Config{doc: doc, src: bytes.Clone(data)}
	if err := c.decode(); err != nil {
		return nil, err
	}
	o := c.typed()
	c.orig = &o
	return c, nil
}

func invalidUTF8Offset(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// typed copies the typed fields alone (deeply), for edit detection.
func (c *Config) typed() Config {
	t := Config{SchemaVersion: c.SchemaVersion, Metadata: c.Metadata, Verifier: c.Verifier, Agent: c.Agent, Environment: c.Environment}
	t.Metadata.Tags = slices.Clone(c.Metadata.Tags)
	if c.Verifier.Env != nil {
		t.Verifier.Env = make(map[string]string, len(c.Verifier.Env))
		for k, v := range c.Verifier.Env {
			t.Verifier.Env[k] = v
		}
	}
	if c.Environment.AllowInternet != nil {
		v := *c.Environment.AllowInternet
		t.Environment.AllowInternet = &v
	}
	return t
}

// Changed reports whether a typed field differs from what was parsed (a
// Config built in memory always counts as changed).
func (c *Config) Changed() bool {
	if c.orig == nil {
		return true
	}
	return !reflect.DeepEqual(c.typed(), *c.orig)
}

type decoder struct{ err error }

func (d *decoder) fail(field, format string, args ...any) {
	if d.err == nil {
		d.err = &FieldError{File: ConfigFile, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
}

func fieldName(section, key string) string {
	if section == "" {
		return key
	}
	return "[" + section + "] " + key
}

func (d *decoder) table(doc map[string]any, name string) map[string]any {
	v, ok := doc[name]
	if !ok {
		return nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		d.fail("["+name+"]", "want a table, got %s", typeName(v))
		return nil
	}
	return t
}

func (d *decoder) str(t map[string]any, section, key string) string {
	v, ok := t[key]
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		d.fail(fieldName(section, key), "want a string, got %s", typeName(v))
	}
	return s
}

func (d *decoder) num(t map[string]any, section, key string) float64 {
	v, ok := t[key]
	if !ok {
		return 0
	}
	var f float64
	switch n := v.(type) {
	case int64:
		f = float64(n)
	case float64:
		f = n
	default:
		d.fail(fieldName(section, key), "want a number, got %s", typeName(v))
		return 0
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		d.fail(fieldName(section, key), "want a finite number, got %v", f)
	} else if f < 0 {
		d.fail(fieldName(section, key), "must not be negative, got %v", f)
	}
	return f
}

func (d *decoder) integer(t map[string]any, section, key string) int64 {
	v, ok := t[key]
	if !ok {
		return 0
	}
	n, ok := v.(int64)
	if !ok {
		// 2048.0 is written by some generators; accept whole floats.
		if f, isF := v.(float64); isF && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			n, ok = int64(f), true
		}
	}
	if !ok {
		d.fail(fieldName(section, key), "want an integer, got %s", typeName(v))
		return 0
	}
	if n < 0 {
		d.fail(fieldName(section, key), "must not be negative, got %d", n)
	}
	return n
}

func (d *decoder) size(t map[string]any, section, key string) int64 {
	v, ok := t[key]
	if !ok {
		return 0
	}
	s, ok := v.(string)
	if !ok {
		d.fail(fieldName(section, key), "want a size string like \"2G\" (or use %s_mb), got %s", key, typeName(v))
		return 0
	}
	mb, err := ParseSizeMB(s)
	if err != nil {
		d.fail(fieldName(section, key), "%v", err)
	}
	return mb
}

func (c *Config) decode() error {
	d := &decoder{}
	doc := c.doc
	switch {
	case doc["schema_version"] != nil:
		c.versionKey = "schema_version"
	case doc["version"] != nil:
		c.versionKey = "version"
	}
	if c.versionKey != "" {
		c.SchemaVersion = d.str(doc, "", c.versionKey)
	}
	if m := d.table(doc, "metadata"); m != nil {
		c.Metadata.AuthorName = d.str(m, "metadata", "author_name")
		c.Metadata.AuthorEmail = d.str(m, "metadata", "author_email")
		c.Metadata.Difficulty = d.str(m, "metadata", "difficulty")
		c.Metadata.Category = d.str(m, "metadata", "category")
		c.Metadata.ExpertTimeEstimateMin = d.num(m, "metadata", "expert_time_estimate_min")
		c.Metadata.JuniorTimeEstimateMin = d.num(m, "metadata", "junior_time_estimate_min")
		if v, ok := m["tags"]; ok {
			arr, ok := v.([]any)
			if !ok {
				d.fail("[metadata] tags", "want an array of strings, got %s", typeName(v))
			}
			c.Metadata.Tags = []string{}
			for i, e := range arr {
				s, ok := e.(string)
				if !ok {
					d.fail("[metadata] tags", "element %d: want a string, got %s", i, typeName(e))
				}
				c.Metadata.Tags = append(c.Metadata.Tags, s)
			}
		}
		if diff := c.Metadata.Difficulty; diff != "" && !slices.Contains(Difficulties, diff) {
			d.fail("[metadata] difficulty", "%q is not one of %s", diff, strings.Join(Difficulties, ", "))
		}
	}
	if v := d.table(doc, "verifier"); v != nil {
		c.Verifier.TimeoutSec = d.num(v, "verifier", "timeout_sec")
		if e, ok := v["env"]; ok {
			et, ok := e.(map[string]any)
			if !ok {
				d.fail("[verifier] env", "want a table of strings, got %s", typeName(e))
			}
			c.Verifier.Env = map[string]string{}
			for k, x := range et {
				s, ok := x.(string)
				if !ok {
					d.fail("[verifier.env] "+k, "want a string, got %s", typeName(x))
				}
				c.Verifier.Env[k] = s
			}
		}
		if sv, ok := v["services"]; ok {
			c.services = d.services(sv)
		}
	}
	if a := d.table(doc, "agent"); a != nil {
		c.Agent.TimeoutSec = d.num(a, "agent", "timeout_sec")
	}
	if e := d.table(doc, "environment"); e != nil {
		c.Environment.BuildTimeoutSec = d.num(e, "environment", "build_timeout_sec")
		c.Environment.DockerImage = d.str(e, "environment", "docker_image")
		c.Environment.CPUs = d.num(e, "environment", "cpus")
		c.Environment.GPUs = d.integer(e, "environment", "gpus")
		c.memoryKey, c.Environment.MemoryMB = d.sizeOrMB(e, "memory")
		c.storageKey, c.Environment.StorageMB = d.sizeOrMB(e, "storage")
		if v, ok := e["allow_internet"]; ok {
			b, ok := v.(bool)
			if !ok {
				d.fail("[environment] allow_internet", "want true or false, got %s", typeName(v))
			}
			c.Environment.AllowInternet = &b
		}
	}
	return d.err
}

// sizeOrMB reads "<base>" (a size string) or "<base>_mb" (an integer).
func (d *decoder) sizeOrMB(e map[string]any, base string) (string, int64) {
	if _, ok := e[base]; ok {
		return base, d.size(e, "environment", base)
	}
	if _, ok := e[base+"_mb"]; ok {
		return base + "_mb", d.integer(e, "environment", base+"_mb")
	}
	return "", 0
}

// ParseSizeMB parses a Harbor size string ("2G", "512M", "1.5g", "10 GB",
// "2GiB", "4096K") into mebibytes; units are binary, as in Harbor.
func ParseSizeMB(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("size %q: want a number and a unit, like \"2G\" or \"512M\"", s)
	}
	if f < 0 {
		return 0, fmt.Errorf("size %q must not be negative", s)
	}
	var mb float64
	switch unit {
	case "K":
		mb = f / 1024
	case "M":
		mb = f
	case "G":
		mb = f * 1024
	case "T":
		mb = f * 1024 * 1024
	default:
		return 0, fmt.Errorf("size %q: unit must be K, M, G or T", s)
	}
	if mb > 1<<40 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(mb), nil
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// Marshal returns task.toml. An unedited Config gives back the bytes it was
// parsed from; an edited one is re-emitted with every unknown key kept.
func (c *Config) Marshal() ([]byte, error) {
	if !c.Changed() && c.src != nil {
		return bytes.Clone(c.src), nil
	}
	doc := cloneDoc(c.doc)
	var o Config
	if c.orig != nil {
		o = *c.orig
	}
	set := func(section, key string, now, was any, zero bool) {
		if reflect.DeepEqual(now, was) {
			return
		}
		t := doc
		if section != "" {
			st, ok := doc[section].(map[string]any)
			if !ok {
				st = map[string]any{}
				doc[section] = st
			}
			t = st
		}
		if zero {
			delete(t, key)
		} else {
			t[key] = now
		}
	}
	vk := c.versionKey
	if vk == "" {
		vk = "version"
	}
	set("", vk, c.SchemaVersion, o.SchemaVersion, c.SchemaVersion == "")
	m, om := c.Metadata, o.Metadata
	set("metadata", "author_name", m.AuthorName, om.AuthorName, m.AuthorName == "")
	set("metadata", "author_email", m.AuthorEmail, om.AuthorEmail, m.AuthorEmail == "")
	set("metadata", "difficulty", m.Difficulty, om.Difficulty, m.Difficulty == "")
	set("metadata", "category", m.Category, om.Category, m.Category == "")
	set("metadata", "tags", m.Tags, om.Tags, m.Tags == nil)
	set("metadata", "expert_time_estimate_min", m.ExpertTimeEstimateMin, om.ExpertTimeEstimateMin, m.ExpertTimeEstimateMin == 0)
	set("metadata", "junior_time_estimate_min", m.JuniorTimeEstimateMin, om.JuniorTimeEstimateMin, m.JuniorTimeEstimateMin == 0)
	set("verifier", "timeout_sec", c.Verifier.TimeoutSec, o.Verifier.TimeoutSec, c.Verifier.TimeoutSec == 0)
	set("verifier", "env", c.Verifier.Env, o.Verifier.Env, c.Verifier.Env == nil)
	set("agent", "timeout_sec", c.Agent.TimeoutSec, o.Agent.TimeoutSec, c.Agent.TimeoutSec == 0)
	e, oe := c.Environment, o.Environment
	set("environment", "build_timeout_sec", e.BuildTimeoutSec, oe.BuildTimeoutSec, e.BuildTimeoutSec == 0)
	set("environment", "docker_image", e.DockerImage, oe.DockerImage, e.DockerImage == "")
	set("environment", "cpus", cpusValue(e.CPUs), cpusValue(oe.CPUs), e.CPUs == 0)
	set("environment", "gpus", e.GPUs, oe.GPUs, e.GPUs == 0)
	var ai, oai any
	if e.AllowInternet != nil {
		ai = *e.AllowInternet
	}
	if oe.AllowInternet != nil {
		oai = *oe.AllowInternet
	}
	set("environment", "allow_internet", ai, oai, ai == nil)
	// An edited size is written as *_mb: the integer form is exact, and
	// the deprecated string key goes so that it cannot override it.
	for _, sz := range []struct {
		base, key string
		now, was  int64
	}{{"memory", c.memoryKey, e.MemoryMB, oe.MemoryMB}, {"storage", c.storageKey, e.StorageMB, oe.StorageMB}} {
		if sz.now == sz.was {
			continue
		}
		env, ok := doc["environment"].(map[string]any)
		if !ok {
			env = map[string]any{}
			doc["environment"] = env
		}
		delete(env, sz.base)
		delete(env, sz.base+"_mb")
		if sz.now != 0 {
			env[sz.base+"_mb"] = sz.now
		}
	}
	return emit(doc, vk)
}

// cpusValue writes whole CPU counts as integers, as Harbor does.
func cpusValue(f float64) any {
	if f == math.Trunc(f) && f < 1<<53 {
		return int64(f)
	}
	return f
}

// sectionOrder is Harbor's own layout of task.toml.
var sectionOrder = []string{"task", "metadata", "verifier", "agent", "environment", "solution"}

// emit writes top-level keys first (the version key leading), then tables
// in Harbor's order, then any other tables sorted by name.
func emit(doc map[string]any, versionKey string) ([]byte, error) {
	var scalars, tables []string
	for k, v := range doc {
		if isTableLike(v) {
			tables = append(tables, k)
		} else if k != versionKey {
			scalars = append(scalars, k)
		}
	}
	slices.Sort(scalars)
	rank := func(k string) int {
		if i := slices.Index(sectionOrder, k); i >= 0 {
			return i
		}
		return len(sectionOrder)
	}
	slices.SortFunc(tables, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	var buf bytes.Buffer
	top := map[string]any{}
	if v, ok := doc[versionKey]; ok {
		top[versionKey] = v
		if err := encodeTo(&buf, top); err != nil {
			return nil, err
		}
		delete(top, versionKey)
	}
	for _, k := range scalars {
		top[k] = doc[k]
	}
	if len(top) > 0 {
		if err := encodeTo(&buf, top); err != nil {
			return nil, err
		}
	}
	for _, k := range tables {
		if buf.Len() > 0 {
			buf.WriteByte('\n')
		}
		if err := encodeTo(&buf, map[string]any{k: doc[k]}); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

func encodeTo(buf *bytes.Buffer, v map[string]any) error {
	enc := toml.NewEncoder(buf)
	enc.SetIndentTables(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("%s: encode: %w", ConfigFile, err)
	}
	return nil
}

func isTableLike(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return true
	case []any:
		if len(x) == 0 {
			return false
		}
		for _, e := range x {
			if _, ok := e.(map[string]any); !ok {
				return false
			}
		}
		return true
	}
	return false
}

func cloneDoc(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneDoc(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}
