package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/telemetry"
)

// Config is the whole pipeline configuration, the Go form of pipeline.yaml.
type Config struct {
	Run Run `yaml:"run"`
	// Data is the local data directory (embedded NATS and S3 state). The
	// --data flag and T1_DATA override it; the loader does not read either.
	Data string `yaml:"data"`
	// LogLevel is the slog level: debug, info, warn or error.
	LogLevel  string           `yaml:"log_level"`
	Bus       Bus              `yaml:"bus"`
	Store     Store            `yaml:"store"`
	Telemetry telemetry.Config `yaml:"telemetry"`
	// Engine is how every stage consumes its events (engine.Settings).
	Engine engine.Settings `yaml:"engine"`
	Stages Stages          `yaml:"stages"`
	// Inference selects the engine rollouts sample from.
	Inference Inference `yaml:"inference"`
	// Sandbox selects the sandbox backend and its default limits.
	Sandbox Sandbox `yaml:"sandbox"`
	// Training configures the critic and PPO stages and the trainer.
	Training Training `yaml:"training"`
	// Variants are the ablations `t1 ablate` runs beside the base run.
	Variants []Variant `yaml:"variants"`
	// Setups are further named configurations of the same file, each the
	// configuration above with some keys changed, a run id and variants
	// of its own; Setup (t1 --setup NAME) selects one.
	Setups []Setup `yaml:"setups"`
}

// Run identifies one run of the pipeline.
type Run struct {
	// ID names the run in subjects (t1.<id>.<type>) and object keys, so it is
	// limited to 1-64 characters from a-z, 0-9 and '-'.
	ID string `yaml:"id"`
	// Seed is the run seed every random choice derives from.
	Seed uint64 `yaml:"seed"`
}

// Mode values for Bus.Mode and Store.Mode.
const (
	Embedded = "embedded" // run the server inside this process
	External = "external" // connect to a server run elsewhere
)

// Bus configures NATS JetStream.
type Bus struct {
	Mode     string      `yaml:"mode"`
	Embedded Listen      `yaml:"embedded"`
	External ExternalBus `yaml:"external"`
	Stream   Stream      `yaml:"stream"`
}

// Listen is where an embedded server listens. Port 0 picks a free port.
type Listen struct {
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
}

// ExternalBus is how to reach and authenticate to a NATS cluster run
// elsewhere. At most one of user, nkey_file and creds_file applies.
type ExternalBus struct {
	URLs []string `yaml:"urls"`
	User string   `yaml:"user"`
	// Password sits in the file in plain text; prefer PasswordEnv, the name
	// of an environment variable that holds it.
	Password    string `yaml:"password"`
	PasswordEnv string `yaml:"password_env"`
	NKeyFile    string `yaml:"nkey_file"`
	CredsFile   string `yaml:"creds_file"`
	TLS         TLS    `yaml:"tls"`
}

// TLS configures a TLS client. Empty files mean the system roots and no
// client certificate.
type TLS struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// Stream configures the JetStream stream that holds the event log.
type Stream struct {
	Name string `yaml:"name"`
	// DedupWindow is how long Nats-Msg-Id duplicates are dropped.
	DedupWindow time.Duration `yaml:"dedup_window"`
	// MaxAge bounds how long events are kept; 0 keeps them forever, which
	// replay relies on.
	MaxAge   time.Duration `yaml:"max_age"`
	Replicas int           `yaml:"replicas"`
	// DeadLetter is the stream that receives events a stage gave up on.
	DeadLetter string `yaml:"dead_letter"`
}

// Store configures the S3-compatible object store.
type Store struct {
	Mode     string        `yaml:"mode"`
	Bucket   string        `yaml:"bucket"`
	Embedded Listen        `yaml:"embedded"`
	External ExternalStore `yaml:"external"`
}

// ExternalStore is an S3 endpoint run elsewhere. Credentials come only from
// the AWS_* environment variables, never from the file.
type ExternalStore struct {
	// Endpoint is host[:port] without a scheme; Secure selects https.
	Endpoint string `yaml:"endpoint"`
	Region   string `yaml:"region"`
	Secure   bool   `yaml:"secure"`
	// Prefix is prepended to every object key, to share a bucket.
	Prefix string `yaml:"prefix"`
}

// Default returns the built-in configuration: everything embedded, small
// enough for a laptop. pipeline.yaml at the repository root spells out the
// same values.
func Default() Config {
	return Config{
		Run:      Run{ID: "main", Seed: 1},
		Data:     ".t1",
		LogLevel: "info",
		Bus: Bus{
			Mode:     Embedded,
			Embedded: Listen{Host: "127.0.0.1"},
			External: ExternalBus{URLs: []string{}},
			Stream: Stream{
				Name:        "T1",
				DedupWindow: 10 * time.Minute,
				Replicas:    1,
				DeadLetter:  "T1_DLQ",
			},
		},
		Store: Store{
			Mode:     Embedded,
			Bucket:   "t1-data",
			Embedded: Listen{Host: "127.0.0.1"},
			External: ExternalStore{Secure: true},
		},
		Telemetry: telemetry.DefaultConfig(),
		Engine:    engine.DefaultSettings(),

		Stages:    defaultStages(),
		Inference: defaultInference(),
		Sandbox:   defaultSandbox(),
		Training:  defaultTraining(),
		Variants:  defaultVariants(),
		Setups:    []Setup{},
	}
}

// YAML is c as pipeline.yaml spells it out: every key, in the file's
// order, durations as Go writes them ("10m0s"). Parse reads it back as c.
func (c Config) YAML() ([]byte, error) { return yaml.Marshal(c) }

// JSON is c with the keys and values of YAML, indented.
func (c Config) JSON() ([]byte, error) {
	y, err := c.YAML()
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, j, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// Load reads the YAML file at path over Default and validates the result,
// as Parse does. A file that cannot be read is an error: callers that have
// no path to give use Default instead.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes data, the contents of the file called name, over Default:
// keys present in data replace the defaults, absent keys and keys with no
// value keep them, and a list replaces the default list as a whole. Unknown
// keys and values of the wrong type are rejected, and the result is
// validated.
//
// Every problem is reported on its own line as "name:line:col: message".
// A validation problem about a key the file leaves out is placed at the
// nearest enclosing key the file has, and at "name: message" when there is
// none. Parse stops at the first decoding problem but reports every
// validation problem.
func Parse(name string, data []byte) (Config, error) {
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return Config{}, decodeError(name, nil, err)
	}
	if len(file.Docs) > 1 {
		return Config{}, fmt.Errorf("%s: want one YAML document, found %d", name, len(file.Docs))
	}
	cfg := Default()
	var body ast.Node
	if len(file.Docs) == 1 {
		body = file.Docs[0].Body
	}
	// An empty document would otherwise decode as zero values over the
	// defaults.
	if body != nil {
		if err := checkScalars(body); err != nil {
			return Config{}, decodeError(name, body, err)
		}
		// Decoding the parsed tree, rather than the bytes, keeps its tokens,
		// which is how an error is traced back to a key path.
		if err := decode(body, &cfg); err != nil {
			return Config{}, decodeError(name, body, err)
		}
	}
	if probs := cfg.problems(); len(probs) > 0 {
		return Config{}, positioned(name, body, probs)
	}
	return cfg, nil
}

// Validate reports every invalid or inconsistent setting, one line each, as
// "key.path: problem". Parse already calls it; call it again after changing
// a loaded Config, for instance from command-line flags.
func (c Config) Validate() error {
	var errs []error
	for _, p := range c.problems() {
		errs = append(errs, errors.New(p.String()))
	}
	return errors.Join(errs...)
}

// decode runs goccy's strict decoder over body. The decoder has panicked on
// malformed input that its parser accepted; a config file must not crash the
// process that reads it.
func decode(body ast.Node, cfg *Config) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cannot decode this YAML (decoder failed: %v)", r)
		}
	}()
	return yaml.NodeToValue(body, cfg, yaml.Strict())
}
