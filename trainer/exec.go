package trainer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/infra/hostres"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// Exec runs every job as an external command (e.g. torchrun over the
// batch's Parquet), one process per job. Each argument of Argv may
// contain placeholders:
//
//	{job}         a file holding the job (JobFile as JSON); its kind says what to do
//	{kind}        the job's kind: actor, critic or sft
//	{manifest}    a file holding the batch manifest (schemas.BatchManifest); "" for sft jobs
//	{out}         the file the command must write its result to
//	{policy}      the prefix of the policy the job (or a fresh critic) starts from; "" when there is none
//	{critic}      the prefix of the critic a critic job starts from (a seeded fresh one too); "" for a fresh critic from the policy and other jobs
//	{checkpoint}  the object-store prefix the new checkpoint should go to
//	{version}     the new checkpoint's version
//
// The command succeeds by exiting 0 after writing {out} (see doc.go for
// each kind's result). A non-zero exit, a missing or malformed result,
// or a result of another kind is a batch.BadInputError carrying the exit status
// and the tail of the command's output; the job's starting checkpoint
// stays current.
type Exec struct {
	Argv []string
	// Dir is the working directory ("" = this process's).
	Dir string
	// Env is added to this process's environment; StoreAccess.Env gives
	// the variables that hand the command the run's object store.
	Env []string
	// TempDir holds the job files ("" = os.TempDir()).
	TempDir string
	// Hyperparameters are the settings each job is to train with (the
	// training section, as the reference backend takes them); each job
	// file carries those of its kind, defaults filled in.
	Hyperparameters ReferenceOptions
	// Store is the run's object store (New sets it), where a critic job
	// that starts a seeded critic puts it first (TrainCritic).
	Store store.ObjectStore
}

// The environment variables that hand an exec command the object store
// the job's keys live in (StoreAccess.Env). An S3 store is
// T1_STORE_ENDPOINT (a URL), T1_STORE_BUCKET, T1_STORE_PREFIX (keys are
// <prefix>/<key> in the bucket; absent when empty) with AWS_REGION and,
// when the store was configured with keys rather than the environment,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; a store that is a local
// directory, each object a file at <dir>/<key>, is T1_STORE_DIR.
const (
	EnvStoreEndpoint = "T1_STORE_ENDPOINT"
	EnvStoreBucket   = "T1_STORE_BUCKET"
	EnvStorePrefix   = "T1_STORE_PREFIX"
	EnvStoreDir      = "T1_STORE_DIR"
)

// StoreAccess is how an external trainer reaches the run's object store
// by itself: an S3 endpoint and bucket (Dir empty) or a local directory.
type StoreAccess struct {
	// Endpoint is a URL (http://host:port, https://s3.example.com); a
	// bare host:port is taken as https when Secure, else http.
	Endpoint, Bucket, Prefix, Region string
	Secure                           bool
	// AccessKey and SecretKey, when empty, are the AWS_* variables the
	// command inherits from this process.
	AccessKey, SecretKey string
	Dir                  string
}

// Env is a's environment variables (see EnvStoreEndpoint).
func (a StoreAccess) Env() []string {
	if a.Dir != "" {
		return []string{EnvStoreDir + "=" + a.Dir}
	}
	ep := a.Endpoint
	if ep != "" && !strings.Contains(ep, "://") {
		scheme := "http://"
		if a.Secure {
			scheme = "https://"
		}
		ep = scheme + ep
	}
	env := []string{EnvStoreEndpoint + "=" + ep, EnvStoreBucket + "=" + a.Bucket}
	if p := strings.Trim(a.Prefix, "/"); p != "" {
		env = append(env, EnvStorePrefix+"="+p)
	}
	if a.Region != "" {
		env = append(env, "AWS_REGION="+a.Region)
	}
	if a.AccessKey != "" || a.SecretKey != "" {
		env = append(env, "AWS_ACCESS_KEY_ID="+a.AccessKey, "AWS_SECRET_ACCESS_KEY="+a.SecretKey)
	}
	return env
}

// TemperaturePerToken is the one way log-probs are taken: the logits of
// each position are divided by the temperature its token was sampled at
// (the tokens table's temperature column; 0, greedy, counts as 1), as the
// sampler did, so the ratio compares the distributions the tokens were
// drawn from.
const TemperaturePerToken = "per_token"

// Hyperparameters are a job's settings in its job file: the section of
// its kind, and how sampling temperatures enter the log-probs.
type Hyperparameters struct {
	Actor       *ActorOptions  `json:"actor,omitempty"`
	Critic      *CriticOptions `json:"critic,omitempty"`
	SFT         *SFTOptions    `json:"sft,omitempty"`
	Temperature string         `json:"temperature"`
}

// hyperparameters are o's settings for a job of kind.
func hyperparameters(o ReferenceOptions, kind Kind) *Hyperparameters {
	o = o.withDefaults()
	h := &Hyperparameters{Temperature: TemperaturePerToken}
	switch kind {
	case KindActor:
		h.Actor = &o.Actor
	case KindCritic:
		h.Critic = &o.Critic
	case KindSFT:
		h.SFT = &o.SFT
	}
	return h
}

// Reference is the in-process backend with the job file's settings: what
// an external trainer that is t1's own reference trains with.
func (h *Hyperparameters) Reference() (ReferenceOptions, error) {
	var o ReferenceOptions
	if h == nil || h.Temperature != TemperaturePerToken {
		return o, fmt.Errorf("hyperparameters: want temperature %q", TemperaturePerToken)
	}
	if h.Actor != nil {
		o.Actor = *h.Actor
	}
	if h.Critic != nil {
		o.Critic = *h.Critic
	}
	if h.SFT != nil {
		o.SFT = *h.SFT
	}
	return o, nil
}

// JobFile is the job an external trainer finds at {job}. Fields a kind
// does not use are absent.
type JobFile struct {
	Kind Kind   `json:"kind"`
	Run  string `json:"run"`
	// Policy is the policy checkpoint the job starts from (actor, sft),
	// or the one a fresh critic starts from (critic; absent for a seeded
	// fresh critic, which Critic names with Fresh).
	Policy string `json:"policy,omitempty"`
	// Critic is the critic checkpoint the job starts from; absent for a
	// fresh critic from Policy, which the trainer makes and warms up
	// (critic).
	Critic string `json:"critic,omitempty"`
	// Fresh says that Critic is a fresh, seeded critic, written for this
	// job as the reference backend initialises one (moe.NewCritic of the
	// critic hyperparameters' model): the trainer warms it up and starts
	// its optimiser anew (critic).
	Fresh bool `json:"fresh,omitempty"`
	// Checkpoint is the object-store prefix the new checkpoint should go
	// to, Version its version.
	Checkpoint string `json:"checkpoint"`
	Version    int64  `json:"version"`
	// Manifest is the batch (actor, critic).
	Manifest *schemas.BatchManifest `json:"manifest,omitempty"`
	// GAE is the advantage estimation the values must use (critic).
	GAE *GAE `json:"gae,omitempty"`
	// Data are the demonstrations' tokens-table objects, Steps the
	// optimiser steps to take and Seed, when present, what draws the
	// order of each pass over the demonstrations (sft; SFTJob.Seed).
	Data  []schemas.FileRef `json:"data,omitempty"`
	Steps int               `json:"steps,omitempty"`
	Seed  uint64            `json:"seed,omitempty"`
	// Hyperparameters are the settings to train with.
	Hyperparameters *Hyperparameters `json:"hyperparameters"`
}

// TrainActor implements Trainer.
func (e *Exec) TrainActor(ctx context.Context, job ActorJob) (*ActorResult, error) {
	if job.Manifest == nil {
		return nil, errors.New("exec trainer: an actor job without a batch manifest")
	}
	return execJob(ctx, e, JobFile{Kind: KindActor, Run: job.Manifest.Run, Policy: job.Policy, Checkpoint: job.Out, Version: job.Version,
		Manifest: job.Manifest}, ParseActorResult)
}

// TrainCritic implements Trainer. The values the result holds are checked
// against the batch by the caller (batch.ValueRows).
func (e *Exec) TrainCritic(ctx context.Context, job CriticJob) (*CriticResult, error) {
	if job.Manifest == nil {
		return nil, errors.New("exec trainer: a critic job without a batch manifest")
	}
	gae := job.GAE
	jf := JobFile{Kind: KindCritic, Run: job.Manifest.Run, Critic: job.Critic, Fresh: job.Fresh, Policy: job.Policy, Checkpoint: job.Out,
		Version: job.Version, Manifest: job.Manifest, GAE: &gae}
	if job.Critic == "" && job.Policy == "" {
		prefix, err := e.freshCritic(ctx, job)
		if err != nil {
			return nil, err
		}
		jf.Critic, jf.Fresh = prefix, true
	}
	return execJob(ctx, e, jf, ParseCriticResult)
}

// freshCritic stores the seeded critic the reference backend would start
// job from (moe.NewCritic: the critic model's shape and seed, with t1's
// tokenizer) at keys.FreshCritic, and returns that prefix. The external
// trainer starts from it as from any critic, so a run's first critic is
// the same whichever backend trains it, and no trainer needs Go's random
// numbers.
func (e *Exec) freshCritic(ctx context.Context, job CriticJob) (string, error) {
	if e.Store == nil {
		return "", errors.New("exec trainer: a seeded fresh critic needs the run's store")
	}
	m, err := moe.NewCritic(e.Hyperparameters.withDefaults().Critic.Model)
	if err != nil {
		return "", batch.Bad(fmt.Errorf("critic model: %w", err))
	}
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		return "", err
	}
	prefix := keys.FreshCritic(job.Manifest.Run, job.Version)
	if err := (&moe.Checkpoint{Model: m, Tokenizer: tok}).Save(ctx, e.Store, prefix); err != nil {
		return "", fmt.Errorf("fresh critic: %w", err)
	}
	return prefix, nil
}

// TrainSFT implements Trainer.
func (e *Exec) TrainSFT(ctx context.Context, job SFTJob) (*SFTResult, error) {
	return execJob(ctx, e, JobFile{Kind: KindSFT, Run: job.Run, Policy: job.Policy, Checkpoint: job.Out, Version: job.Version,
		Data: job.Data, Steps: job.Steps, Seed: job.Seed}, ParseSFTResult)
}

// execJob writes the job's files, runs the command and parses its result.
func execJob[R any](ctx context.Context, e *Exec, job JobFile, parse func([]byte) (*R, error)) (*R, error) {
	if len(e.Argv) == 0 {
		return nil, errors.New("exec trainer: no command configured")
	}
	dir, releaseDir, err := hostres.MkdirTemp(e.TempDir, "t1-train-", "train scratch")
	if err != nil {
		return nil, fmt.Errorf("exec trainer: %w", err)
	}
	defer releaseDir()
	job.Hyperparameters = hyperparameters(e.Hyperparameters, job.Kind)
	jobPath, manifest, out := filepath.Join(dir, "job.json"), "", filepath.Join(dir, "result.json")
	if err := writeJSON(jobPath, job); err != nil {
		return nil, err
	}
	if job.Manifest != nil {
		manifest = filepath.Join(dir, "manifest.json")
		if err := writeJSON(manifest, job.Manifest); err != nil {
			return nil, err
		}
	}
	rep := strings.NewReplacer("{job}", jobPath, "{kind}", string(job.Kind), "{manifest}", manifest, "{out}", out,
		"{policy}", job.Policy, "{critic}", job.Critic, "{checkpoint}", job.Checkpoint, "{version}", strconv.FormatInt(job.Version, 10))
	argv := make([]string, len(e.Argv))
	for i, a := range e.Argv {
		argv[i] = rep.Replace(a)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = e.Dir
	cmd.Env = append(os.Environ(), e.Env...)
	var output tail
	cmd.Stdout = &output
	cmd.Stderr = &output
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("exec trainer %s: %w", argv[0], ctx.Err())
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, batch.Bad(fmt.Errorf("exec trainer %s exited with status %d: %s", argv[0], ee.ExitCode(), output.String()))
		}
		return nil, batch.Bad(fmt.Errorf("exec trainer %s: %w", argv[0], err))
	}
	rb, err := os.ReadFile(out)
	if err != nil {
		return nil, batch.Bad(fmt.Errorf("exec trainer %s exited 0 but wrote no result file: %w", argv[0], err))
	}
	res, err := parse(rb)
	if err != nil {
		return nil, batch.Bad(fmt.Errorf("exec trainer %s (%s job): %w", argv[0], job.Kind, err))
	}
	return res, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("exec trainer: %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("exec trainer: %w", err)
	}
	return nil
}

// resultFile is an external trainer's result file, of any kind.
type resultFile struct {
	// Kind must be the job's; an actor result may leave it out, as
	// results did before other kinds existed.
	Kind       Kind                `json:"kind"`
	Checkpoint string              `json:"checkpoint"`
	Metrics    json.RawMessage     `json:"metrics"`
	Values     []batch.ChunkValues `json:"values"`
}

// parseResult decodes a result file of kind strictly (unknown fields, in
// it or in its metrics, are errors, so a misspelt metric is not silently
// dropped) into its checkpoint, metrics and values, and checks that it
// answers kind and names a checkpoint.
func parseResult(b []byte, kind Kind, metrics any) (*resultFile, error) {
	var res resultFile
	if err := strict(b, &res); err != nil {
		return nil, fmt.Errorf("result file: %w", err)
	}
	if res.Kind != kind && !(res.Kind == "" && kind == KindActor) {
		return nil, fmt.Errorf("result file answers a job of kind %q, not %q", res.Kind, kind)
	}
	if res.Checkpoint == "" {
		return nil, errors.New("result file names no checkpoint")
	}
	if res.Values != nil && kind != KindCritic {
		return nil, fmt.Errorf("result file of a %s job holds values", kind)
	}
	if len(res.Metrics) > 0 {
		if err := strict(res.Metrics, metrics); err != nil {
			return nil, fmt.Errorf("result file: metrics: %w", err)
		}
	}
	return &res, nil
}

// strict decodes exactly one JSON value with no unknown fields.
func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// ParseActorResult decodes an actor job's result file and checks that its
// counts are possible.
func ParseActorResult(b []byte) (*ActorResult, error) {
	var m ActorMetrics
	res, err := parseResult(b, KindActor, &m)
	if err != nil {
		return nil, err
	}
	if m.Steps < 0 || m.Actions < 0 || m.RoutingMismatches < 0 || m.RoutingSets < 0 || m.LossDrift < 0 || m.RoutingMismatches > m.RoutingSets {
		return nil, fmt.Errorf("result file: impossible counts (steps %d, actions %d, routing mismatches %d of %d sets, loss drift %d)",
			m.Steps, m.Actions, m.RoutingMismatches, m.RoutingSets, m.LossDrift)
	}
	return &ActorResult{Checkpoint: res.Checkpoint, Metrics: m}, nil
}

// ParseCriticResult decodes a critic job's result file and checks that it
// holds values and possible counts; whether the values fit the batch is
// batch.ValueRows' to check.
func ParseCriticResult(b []byte) (*CriticResult, error) {
	var m CriticMetrics
	res, err := parseResult(b, KindCritic, &m)
	if err != nil {
		return nil, err
	}
	if len(res.Values) == 0 {
		return nil, errors.New("result file of a critic job holds no values")
	}
	if m.Steps < 0 || m.WarmupSteps < 0 || m.ExplainedVariance > 1 || m.ValueLoss < 0 {
		return nil, fmt.Errorf("result file: impossible metrics (steps %d, warm-up steps %d, explained variance %g, value loss %g)",
			m.Steps, m.WarmupSteps, m.ExplainedVariance, m.ValueLoss)
	}
	return &CriticResult{Checkpoint: res.Checkpoint, Values: res.Values, Metrics: m}, nil
}

// ParseSFTResult decodes an SFT job's result file and checks that its
// counts are possible.
func ParseSFTResult(b []byte) (*SFTResult, error) {
	var m SFTMetrics
	res, err := parseResult(b, KindSFT, &m)
	if err != nil {
		return nil, err
	}
	if m.Steps < 0 || m.Sequences < 0 {
		return nil, fmt.Errorf("result file: impossible counts (steps %d, sequences %d)", m.Steps, m.Sequences)
	}
	return &SFTResult{Checkpoint: res.Checkpoint, Metrics: m}, nil
}

// tail keeps the last 4 KiB written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tail) String() string { return strings.TrimSpace(string(t.b)) }
