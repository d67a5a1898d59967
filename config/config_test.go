package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// pipeline.yaml spells out exactly the built-in configuration, key by key:
// every key of Default is in the file, the file has no other, and each
// has the default's value.
func TestPipelineYAMLIsDefault(t *testing.T) {
	data, err := os.ReadFile("../pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse("pipeline.yaml", data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	file, defaults, values := tree(t, data), yamlTree(t, Default()), yamlTree(t, got)
	// With every key the file's, got's values are the file's values.
	diffs := append(diffKeys("", defaults, file), diffValues("", defaults, values)...)
	for _, d := range diffs {
		t.Errorf("pipeline.yaml: %s", d)
	}
	if want := Default(); len(diffs) == 0 && !reflect.DeepEqual(got, want) {
		// What YAML writes alike, such as a nil list and an empty one.
		t.Errorf("pipeline.yaml and Default() differ:\nfile:    %+v\ndefault: %+v", got, want)
	}
}

// What t1 config defaults prints reads back as the defaults.
func TestDefaultsRoundTrip(t *testing.T) {
	y, err := Default().YAML()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse("defaults.yaml", y)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, y)
	}
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("defaults read back differ:\ngot:  %+v\nwant: %+v", got, want)
	}
	j, err := Default().JSON()
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON any
	if err := json.Unmarshal(j, &fromJSON); err != nil {
		t.Fatalf("JSON: %v\n%s", err, j)
	}
	for _, d := range diffValues("", yamlTree(t, Default()), fromJSON) {
		t.Errorf("JSON: %s", d)
	}
}

func yamlTree(t *testing.T, c Config) any {
	t.Helper()
	y, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	return tree(t, y)
}

// tree decodes YAML into maps, lists and scalars.
func tree(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// diffKeys lists the keys of want that got lacks and those got has beyond
// want, by key path.
func diffKeys(path string, want, got any) []string {
	var out []string
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want a mapping, got %v", path, got)}
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if _, ok := g[k]; !ok {
				out = append(out, fmt.Sprintf("missing key %s", join(path, k)))
				continue
			}
			out = append(out, diffKeys(join(path, k), w[k], g[k])...)
		}
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if _, ok := w[k]; !ok {
				out = append(out, fmt.Sprintf("extra key %s", join(path, k)))
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d items, got %v", path, len(w), got)}
		}
		for i := range w {
			out = append(out, diffKeys(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
	}
	return out
}

// diffValues lists the leaves of want whose value in got differs, by key
// path; numbers compare by value, whatever their type.
func diffValues(path string, want, got any) []string {
	var out []string
	switch w := want.(type) {
	case map[string]any:
		g, _ := got.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(w)) {
			out = append(out, diffValues(join(path, k), w[k], g[k])...)
		}
	case []any:
		g, _ := got.([]any)
		if len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %v, got %v", path, want, got)}
		}
		for i := range w {
			out = append(out, diffValues(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
	default:
		if fmt.Sprint(number(want)) != fmt.Sprint(number(got)) {
			out = append(out, fmt.Sprintf("%s: want %v, got %v", path, want, got))
		}
	}
	return out
}

// number turns any number into a float64, leaving other values be.
func number(v any) any {
	if r := reflect.ValueOf(v); r.CanInt() {
		return float64(r.Int())
	} else if r.CanUint() {
		return float64(r.Uint())
	} else if r.CanFloat() {
		return r.Float()
	}
	return v
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestParseOverlaysDefaults(t *testing.T) {
	src := `
run: {id: exp-7, seed: 42}
bus:
  mode: external
  external:
    urls: [nats://a:4222, nats://b:4222]
    user: t1
    password_env: T1_NATS_PASSWORD
engine:
  backoff: [2s]
  heartbeat: 500ms
telemetry:
  traces: otlp
  otlp_endpoint: http://collector:4318
`
	got, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Run = Run{ID: "exp-7", Seed: 42}
	want.Bus.Mode = External
	want.Bus.External.URLs = []string{"nats://a:4222", "nats://b:4222"}
	want.Bus.External.User = "t1"
	want.Bus.External.PasswordEnv = "T1_NATS_PASSWORD"
	want.Engine.Backoff = []time.Duration{2 * time.Second}
	want.Engine.Heartbeat = 500 * time.Millisecond
	want.Telemetry.Traces = "otlp"
	want.Telemetry.OTLPEndpoint = "http://collector:4318"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	// A key with no value keeps its default, like an absent one.
	for _, src := range []string{"", "# nothing here\n", "run:\n", "data:\nengine:\n  heartbeat:\n"} {
		got, err := Parse("p.yaml", []byte(src))
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		if !reflect.DeepEqual(got, Default()) {
			t.Errorf("Parse(%q) = %+v, want Default()", src, got)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load = %v, want a not-exist error", err)
	}
}

var lineStart = regexp.MustCompile(`^p\.yaml:(\d+:\d+:)? `)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{
			"unknown top-level key",
			"run:\n  id: x\nsotre:\n  mode: embedded\n",
			`p.yaml:3:1: unknown key "sotre" (did you mean "store"?)`,
		},
		{
			"unknown nested key with suggestion",
			"bus:\n  stream:\n    dedup_windw: 5m\n",
			`p.yaml:3:5: unknown key "dedup_windw" in bus.stream (did you mean "dedup_window"?)`,
		},
		{
			"unknown nested key without suggestion",
			"store:\n  external: {endpoint: s3, access_key: AKIA}\n",
			`p.yaml:2:28: unknown key "access_key" in store.external; known keys: endpoint, region, secure, prefix`,
		},
		{
			"first of several unknown keys",
			"bus:\n  stream:\n    nmae: X\n    zzz: 1\n    yyy: 2\n",
			`p.yaml:3:5: unknown key "nmae" in bus.stream (did you mean "name"?)`,
		},
		{
			"camelCase key",
			"logLevel: debug\n",
			`p.yaml:1:1: unknown key "logLevel" (did you mean "log_level"?)`,
		},
		{
			"string for seed",
			"run:\n  seed: abc\n",
			`p.yaml:2:9: run.seed: want a non-negative integer, got "abc"`,
		},
		{
			"negative seed",
			"run:\n  seed: -1\n",
			`p.yaml:2:9: run.seed: want a non-negative integer, got -1`,
		},
		{
			"seed beyond uint64",
			"run:\n  seed: 18446744073709551616\n",
			`p.yaml:2:9: run.seed: want a non-negative integer, got "18446744073709551616"`,
		},
		{
			"list for document",
			"- run\n",
			`p.yaml:1:1: top level: want a mapping with keys run, data, log_level, bus, store, telemetry, engine, stages, inference, sandbox, training, variants, setups, got a list`,
		},
		{
			"fraction for integer",
			"engine:\n  concurrency: 2.5\n",
			`p.yaml:2:16: engine.concurrency: want an integer, got 2.5`,
		},
		{
			"bad duration",
			"engine:\n  ack_wait: 30 seconds\n",
			`p.yaml:2:13: engine.ack_wait: want a duration such as "30s" or "10m", got "30 seconds"`,
		},
		{
			"bare number for duration",
			"engine:\n  ack_wait: 30\n",
			`p.yaml:2:13: engine.ack_wait: want a duration such as "30s" or "10m", got 30`,
		},
		{
			"bad duration in list",
			"engine:\n  backoff: [1s, 5 s]\n",
			`p.yaml:2:17: engine.backoff[1]: want a duration such as "30s" or "10m", got "5 s"`,
		},
		{
			"scalar for section",
			"bus: nats\n",
			`p.yaml:1:6: bus: want a mapping with keys mode, embedded, external, stream, got "nats"`,
		},
		{
			"string for list",
			"bus:\n  external:\n    urls: nats://a:4222\n",
			`p.yaml:3:11: bus.external.urls: want a list of strings, got "nats://a:4222"`,
		},
		{
			"tag on nothing",
			"engine:\n  backoff: !seq\n",
			`p.yaml:2:12: engine.backoff: want a list of durations such as [1s, 5s], got !seq`,
		},
		{
			"word for bool",
			"store:\n  external:\n    secure: off\n",
			`p.yaml:3:13: store.external.secure: want true or false, got "off"`,
		},
		{
			"bad enum",
			"bus:\n  mode: foo\n",
			`p.yaml:2:9: bus.mode: unknown mode "foo" (want embedded or external)`,
		},
		{
			"heartbeat not shorter than ack_wait",
			"engine:\n  ack_wait: 10s\n  heartbeat: 10s\n",
			`p.yaml:3:14: engine.heartbeat: must be shorter than engine.ack_wait (10s), got 10s`,
		},
		{
			"heartbeat conflicts with default ack_wait",
			"engine:\n  heartbeat: 1m\n",
			`p.yaml:2:14: engine.heartbeat: must be shorter than engine.ack_wait (30s), got 1m0s`,
		},
		{
			"bad run id",
			"run:\n  id: Demo_1\n",
			`p.yaml:2:7: run.id: "Demo_1" is not a valid run id: use 1-64 characters from a-z, 0-9 and '-', starting with a letter or digit`,
		},
		{
			"external bus without urls",
			"bus:\n  mode: external\n",
			`p.yaml:1:1: bus.external.urls: required when bus.mode is external`,
		},
		{
			"bad telemetry exporter",
			"telemetry:\n  traces: jaeger\n",
			`p.yaml:2:11: telemetry.traces: unknown exporter "jaeger" (want off, stdout, file or otlp)`,
		},
		{
			"YAML syntax error",
			"run:\n  id: [demo\n",
			`p.yaml:2:7: invalid YAML: sequence end token ']' not found`,
		},
		{
			"duplicate key",
			"data: a\ndata: b\n",
			`p.yaml:2:1: invalid YAML: mapping key "data" already defined at [1:1]`,
		},
		{
			"two documents",
			"data: a\n---\ndata: b\n",
			`p.yaml: want one YAML document, found 2`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse succeeded, want %s", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("Parse error\ngot:  %s\nwant: %s", got, tc.want)
			}
			if strings.Contains(err.Error(), "\n") || !lineStart.MatchString(err.Error()) {
				t.Errorf("error is not one line starting with the file name: %q", err)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	src := "log_level: loud\nengine:\n  concurrency: 0\n"
	_, err := Parse("p.yaml", []byte(src))
	want := "p.yaml:1:12: log_level: unknown level \"loud\" (want debug, info, warn or error)\n" +
		"p.yaml:3:16: engine.concurrency: must be at least 1, got 0"
	if err == nil || err.Error() != want {
		t.Fatalf("Parse error\ngot:  %v\nwant: %s", err, want)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"bucket", func(c *Config) { c.Store.Bucket = "My_Bucket" }, `store.bucket: "My_Bucket" is not a valid bucket name: use a-z, 0-9, '.' and '-', starting and ending with a letter or digit`},
		{"store endpoint scheme", func(c *Config) { c.Store.Mode = External; c.Store.External.Endpoint = "https://s3" }, `store.external.endpoint: want host[:port] without a scheme (secure selects https), got "https://s3"`},
		{"password twice", func(c *Config) {
			c.Bus.Mode = External
			c.Bus.External = ExternalBus{URLs: []string{"nats://a"}, User: "u", Password: "p", PasswordEnv: "P"}
		}, `bus.external.password_env: set password or password_env, not both`},
		{"two auth methods", func(c *Config) {
			c.Bus.Mode = External
			c.Bus.External = ExternalBus{URLs: []string{"nats://a"}, NKeyFile: "k", CredsFile: "c"}
		}, `bus.external.creds_file: conflicts with nkey_file: use one way to authenticate`},
		{"backoff longer than max_deliver", func(c *Config) { c.Engine.MaxDeliver = 2 }, `engine.backoff: has 3 entries, more than engine.max_deliver (2)`},
		{"max_ack_pending below concurrency", func(c *Config) { c.Engine.Concurrency, c.Engine.MaxAckPending = 8, 4 },
			`engine.max_ack_pending: must be at least concurrency (8), or a worker never runs all its handlers; got 4`},
		{"dead letter is the stream", func(c *Config) { c.Bus.Stream.DeadLetter = "T1" }, `bus.stream.dead_letter: must differ from bus.stream.name (T1)`},
		{"port", func(c *Config) { c.Bus.Embedded.Port = 70000 }, `bus.embedded.port: want 0-65535 (0 picks a free port), got 70000`},
		{"empty data", func(c *Config) { c.Data = "" }, `data: required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.modify(&c)
			if err := c.Validate(); err == nil || err.Error() != tc.want {
				t.Errorf("Validate\ngot:  %v\nwant: %s", err, tc.want)
			}
		})
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"mode", "embedded", "external", "stream"}
	for key, want := range map[string]string{
		"mdoe":      "mode",
		"embeded":   "embedded",
		"External":  "external",
		"streams":   "stream",
		"replicas":  "",
		"m":         "",
		"externals": "external",
	} {
		if got := suggest(key, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", key, got, want)
		}
	}
}

// FuzzParse checks that no input panics and that every error line names
// the file.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("../pipeline.yaml"); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"", "run: {id: x}\n", "bus:\n  mode: external\n", "engine:\n  backoff: [1s, x]\n",
		"- a\n", "a: &x 1\nb: *x\n", "bus:\n  embedded:\n    <<: {host: h}\n", "{", "run:\n  seed: 1e99\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The fuzzer has no per-input time limit; without one a hang is
		// reported without the input that caused it.
		type result struct {
			cfg Config
			err error
		}
		done := make(chan result, 1)
		go func() {
			cfg, err := Parse("p.yaml", data)
			done <- result{cfg, err}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("Parse did not return within 5s")
		}
		cfg, err := r.cfg, r.err
		if err != nil {
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !lineStart.MatchString(line) {
					t.Fatalf("error line %q does not start with the file name", line)
				}
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that Validate rejects: %v", err)
		}
	})
}
