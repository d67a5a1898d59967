package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/t1pipe/t1/check"
	"github.com/t1pipe/t1/infra/telemetry"
	objkeys "github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
)

var (
	streamName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	// S3 bucket naming: 3-63 characters, as minio-go enforces for every
	// endpoint.
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
)

// problems lists every invalid setting in c, in file order.
func (c Config) problems() []problem {
	var ps []problem
	bad := func(path, format string, args ...any) {
		ps = append(ps, problem{path: path, msg: fmt.Sprintf(format, args...)})
	}
	oneOf := func(path, what, v string, allowed ...string) bool {
		if slices.Contains(allowed, v) {
			return true
		}
		bad(path, "unknown %s %q (want %s)", what, v, orList(allowed))
		return false
	}

	// The run id is a subject token and the first component of every key.
	if objkeys.ValidRun(c.Run.ID) != nil {
		bad("run.id", "%q is not a valid run id: use 1-64 characters from a-z, 0-9 and '-', starting with a letter or digit", c.Run.ID)
	}
	if c.Data == "" {
		bad("data", "required")
	}
	oneOf("log_level", "level", c.LogLevel, "debug", "info", "warn", "error")

	// Bus.
	if oneOf("bus.mode", "mode", c.Bus.Mode, Embedded, External) {
		if c.Bus.Mode == Embedded {
			c.Bus.Embedded.check("bus.embedded", bad)
		} else {
			c.Bus.External.check(bad)
		}
	}
	s := c.Bus.Stream
	for _, f := range []struct{ path, v string }{{"bus.stream.name", s.Name}, {"bus.stream.dead_letter", s.DeadLetter}} {
		if !streamName.MatchString(f.v) {
			bad(f.path, "%q is not a valid stream name: use letters, digits, '_' and '-'", f.v)
		}
	}
	if s.DeadLetter == s.Name && s.Name != "" {
		bad("bus.stream.dead_letter", "must differ from bus.stream.name (%s)", s.Name)
	}
	if s.DedupWindow <= 0 {
		bad("bus.stream.dedup_window", "must be positive, got %s", s.DedupWindow)
	}
	if s.MaxAge < 0 {
		bad("bus.stream.max_age", "must not be negative (0 keeps events forever), got %s", s.MaxAge)
	}
	if s.Replicas < 1 || s.Replicas > 5 {
		bad("bus.stream.replicas", "want 1-5, got %d", s.Replicas)
	}

	// Store.
	if !bucketName.MatchString(c.Store.Bucket) {
		bad("store.bucket", "%q is not a valid bucket name: use a-z, 0-9, '.' and '-', starting and ending with a letter or digit", c.Store.Bucket)
	}
	if oneOf("store.mode", "mode", c.Store.Mode, Embedded, External) {
		if c.Store.Mode == Embedded {
			c.Store.Embedded.check("store.embedded", bad)
		} else {
			switch ep := c.Store.External.Endpoint; {
			case ep == "":
				bad("store.external.endpoint", "required when store.mode is external")
			case strings.Contains(ep, "://"):
				bad("store.external.endpoint", "want host[:port] without a scheme (secure selects https), got %q", ep)
			}
		}
	}

	// Telemetry checks its own fields; only the key path is added here.
	for _, err := range unjoin(c.Telemetry.Validate()) {
		if fe, ok := errors.AsType[*telemetry.FieldError](err); ok {
			bad("telemetry."+fe.Field, "%s", fe.Problem)
		} else {
			bad("telemetry", "%v", err)
		}
	}

	c.Engine.Check(check.Report(bad).Under("engine"))

	c.Inference.check(bad)
	c.Sandbox.check(bad)
	c.Training.check(bad)

	c.Stages.check(bad)
	c.checkTokenizerDir(bad)
	c.checkVariants(bad)
	c.checkSetups(bad)
	return ps
}

// checkTokenizerDir refuses a stages.rollout.model.tokenizer directory
// whose tokenizer files disagree with the local inference.checkpoint's
// own (moe.CheckTokenizerDir): every prompt would render one model's
// template over another's ids. A directory without tokenizer.json is
// reported by the rollout settings' own check; a checkpoint in the object
// store is compared when an episode starts (agent.Config.Chat).
func (c Config) checkTokenizerDir(bad func(path, format string, args ...any)) {
	dir, ck := c.Stages.Rollout.Model.Tokenizer, c.Inference.Checkpoint
	if dir == "" || ck == "" {
		return
	}
	for _, f := range []string{filepath.Join(dir, moe.TokenizerFile), filepath.Join(ck, moe.ConfigFile)} {
		if _, err := os.Stat(f); err != nil {
			return
		}
	}
	if err := moe.CheckTokenizerDir(ck, dir); err != nil {
		bad("stages.rollout.model.tokenizer", "%v", err)
	}
}

func (l Listen) check(path string, bad func(path, format string, args ...any)) {
	if l.Host == "" {
		bad(path+".host", "required")
	}
	if l.Port < 0 || l.Port > 65535 {
		bad(path+".port", "want 0-65535 (0 picks a free port), got %d", l.Port)
	}
}

func (x ExternalBus) check(bad func(path, format string, args ...any)) {
	const p = "bus.external"
	if len(x.URLs) == 0 {
		bad(p+".urls", "required when bus.mode is external")
	}
	for i, u := range x.URLs {
		if strings.TrimSpace(u) == "" {
			bad(fmt.Sprintf("%s.urls[%d]", p, i), "empty URL")
		}
	}
	if x.Password != "" && x.PasswordEnv != "" {
		bad(p+".password_env", "set password or password_env, not both")
	}
	if (x.Password != "" || x.PasswordEnv != "") && x.User == "" {
		bad(p+".user", "required with a password")
	}
	var auth []string
	for _, a := range []struct{ key, v string }{{"user", x.User}, {"nkey_file", x.NKeyFile}, {"creds_file", x.CredsFile}} {
		if a.v != "" {
			auth = append(auth, a.key)
		}
	}
	if len(auth) > 1 {
		bad(p+"."+auth[1], "conflicts with %s: use one way to authenticate", auth[0])
	}
	if (x.TLS.CertFile == "") != (x.TLS.KeyFile == "") {
		bad(p+".tls", "cert_file and key_file go together")
	}
}

// unjoin splits an errors.Join result back into its parts.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
