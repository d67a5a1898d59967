package pipeline

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/chat"
	"github.com/t1pipe/t1/infra/egress"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/infra/s3"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/audit"
	"github.com/t1pipe/t1/stages/control"
	"github.com/t1pipe/t1/stages/critic"
	"github.com/t1pipe/t1/stages/eval"
	"github.com/t1pipe/t1/stages/ppo"
	"github.com/t1pipe/t1/stages/reward"
	"github.com/t1pipe/t1/stages/rollout"
	"github.com/t1pipe/t1/stages/sft"
	"github.com/t1pipe/t1/stages/synth"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/taskgen"
	"github.com/t1pipe/t1/trainer"
	"github.com/t1pipe/t1/trial"
	"github.com/t1pipe/t1/update"

	"golang.org/x/sys/unix"
)

// Pipeline is every stage of a run, wired from its configuration.
type Pipeline struct {
	stages  []engine.Stage
	started schemas.RunStartedPayload
	hash    string
	runner  engine.RunnerConfig
}

// Option adjusts Build.
type Option func(*options)

type options struct {
	policies func(rollout.Policies) rollout.Policies
	evalOnly bool
	workDir  string
	suites   map[string]eval.Suite
}

// WithSuite gives the eval stage a suite beside the configured one, for a
// job that evaluates on a directory of its own (t1 eval --suite DIR). It
// feeds no event id: runs digest as if it were not there.
func WithSuite(name string, su eval.Suite) Option {
	return func(o *options) {
		if o.suites == nil {
			o.suites = map[string]eval.Suite{}
		}
		o.suites[name] = su
	}
}

// EvaluationOnly says the pipeline only evaluates (t1 eval): no reward
// it computes trains a policy, so sandbox.network registries needs no
// sandbox.network_rewards (config.Sandbox.CheckTraining).
func EvaluationOnly() Option {
	return func(o *options) { o.evalOnly = true }
}

// WithWorkDir resolves the configuration's relative paths (evaluation
// directories, a local initial checkpoint, the exec trainer's working
// directory) against dir instead of the process's working directory,
// which the embedded S3 gateway changes: pass local.Infra.WorkDir.
func WithWorkDir(dir string) Option {
	return func(o *options) { o.workDir = dir }
}

// WithPolicies has the rollout stage sample from what wrap makes of the
// configured policies (the initial policy of cfg.Inference as version 0,
// then the checkpoints PPO stores), for tests that script a policy.
func WithPolicies(wrap func(configured rollout.Policies) rollout.Policies) Option {
	return func(o *options) { o.policies = wrap }
}

// Build wires every stage of cfg's run on log and st. An error means the
// configuration cannot run: an unavailable sandbox backend, an unknown
// reward mode, an unreadable evaluation directory, a missing API key.
func Build(cfg config.Config, log *engine.Log, st store.ObjectStore, opts ...Option) (*Pipeline, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if o.workDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("working directory: %w", err)
		}
		o.workDir = wd
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(o.workDir, p)
	}
	sc := cfg.Stages
	if !o.evalOnly {
		if err := cfg.Sandbox.CheckTraining(); err != nil {
			return nil, err
		}
	}
	be, err := cfg.Sandbox.NewBackend("")
	if err != nil {
		return nil, err
	}
	opt := trial.Options{Backend: be, Limits: cfg.Sandbox.SandboxLimits(), AllowUnisolated: cfg.Sandbox.AllowUnisolated}
	if cfg.Sandbox.Network == egress.Registries {
		if opt.Registries, err = cfg.Sandbox.AllowList(); err != nil {
			return nil, err
		}
	}
	// The initial checkpoint is a local directory or an object-store prefix.
	initialCheckpoint := cfg.Inference.Checkpoint
	if _, err := os.Stat(filepath.Join(abs(initialCheckpoint), moe.ConfigFile)); initialCheckpoint != "" && err == nil {
		initialCheckpoint = abs(initialCheckpoint)
	}
	// A checkpoint's own config.json gives the model's dimensions; from
	// here on cfg carries them, so the hash, the episode bounds and the
	// critic's shape all follow the checkpoint.
	mcfg, modelType, err := ModelShape(cfg.Inference.Model, initialCheckpoint, st)
	if err != nil {
		return nil, err
	}
	if modelType != moe.ModelType && (cfg.Training.Trainer.Backend != trainer.BackendExec || cfg.Inference.Backend == inference.BackendReference) {
		return nil, fmt.Errorf("inference.checkpoint %q: model_type %q: t1's reference trainer and engine train and serve only Qwen3-MoE (%s, %s); "+
			"an external architecture needs training.trainer.backend: exec (your trainer) and inference.backend: sglang or vllm (your engine)",
			initialCheckpoint, modelType, moe.ModelType, moe.Architecture)
	}
	cfg.Inference.Model = config.ModelOf(mcfg)
	dims := schemas.ModelDims{Vocab: mcfg.Vocab, Layers: mcfg.Layers, TopK: mcfg.TopK, Experts: mcfg.Experts}
	rw, err := reward.New(reward.Config{Store: st, Trial: opt, Settings: sc.Reward, Log: log})
	if err != nil {
		return nil, err
	}
	initial := func(ctx context.Context) (*moe.Checkpoint, error) {
		return inference.LoadCheckpoint(ctx, initialCheckpoint, mcfg, st)
	}
	tc := cfg.Training
	tr, err := trainer.New(st, trainer.Options{Backend: tc.Trainer.Backend, Exec: trainer.Exec{Argv: tc.Trainer.Command, Dir: abs(cmp.Or(tc.Trainer.Dir, ".")), Env: storeEnv(st)},
		Reference: trainer.ReferenceOptions{
			Actor: trainer.ActorOptions{Epochs: tc.Epochs, Minibatches: tc.Minibatches, NormalizeAdvantages: tc.NormalizeAdvantages, WeighAttempts: tc.LossWeighting == config.LossPerAttempt, Clip: tc.Clip, Adam: tc.Adam(), MaxGradNorm: tc.MaxGradNorm, Replay: tc.Replay, MaxLiveKL: tc.MaxLiveKL, ImportanceCap: tc.DecoupledCap()},
			Critic: trainer.CriticOptions{Model: mcfg, Adam: tc.CriticAdam(), ValueClip: tc.ValueClip, Epochs: tc.CriticEpochs,
				MaxGradNorm: tc.MaxGradNorm, WarmupSteps: tc.Warmup.Steps, WarmupEV: tc.Warmup.EV},
			SFT: trainer.SFTOptions{Adam: tc.SFTAdam(), Schedule: tc.SFTSchedule, MaxGradNorm: tc.MaxGradNorm, Batch: tc.SFTBatch},
		}})
	if err != nil {
		return nil, err
	}

	cc := control.Config{Settings: sc.Control, EvalSuite: sc.Eval.Suite, EvalAttempts: sc.Eval.Attempts, Model: dims,
		MaxSimilarity: sc.Audit.MaxSimilarity, MaxStaleness: tc.MaxStaleness}
	suites := map[string]eval.Suite{}
	var refs []harbor.Reference
	if sc.Eval.Suite != "" {
		su := sc.Eval.Resolve(o.workDir)
		suites[sc.Eval.Suite] = su
		// Training tasks must stay apart from every task of the suite.
		if refs, err = eval.References(su); err != nil {
			return nil, fmt.Errorf("stages.eval: %w", err)
		}
	}
	for name, su := range o.suites {
		suites[name] = su
	}
	sy, err := synthConfig(sc.Synth, st, opt)
	if err != nil {
		return nil, err
	}
	if sc.Synth.AvoidEval {
		sy.Avoid, sy.MaxSimilarity = refs, sc.Audit.MaxSimilarity
	}
	// A branch reads the checkpoints it did not make from its ancestors.
	lineage := update.Lineage(log.Lineage)
	// t1 reads the weights of an initial checkpoint only to run them: with
	// another architecture, or with an exec trainer and a remote engine
	// (a real Qwen3-MoE's weights are tens of GB), it reads only its
	// config.json and tokenizer.
	external := ""
	if modelType != moe.ModelType || (cfg.Training.Trainer.Backend == trainer.BackendExec && cfg.Inference.Backend != inference.BackendReference) {
		external = initialCheckpoint
	}
	policies, err := newPolicies(st, cfg.Inference, abs(cfg.Inference.WeightsDir), initial, external, lineage)
	if err != nil {
		return nil, err
	}
	if o.policies != nil {
		policies = o.policies(policies)
	}
	p := &Pipeline{
		started: schemas.RunStartedPayload{Seed: cfg.Run.Seed, Model: dims, Iterations: sc.Control.Iterations,
			RewardScale: sc.Reward.Scale},
		hash: ConfigHash(hashed{sc, hashedTraining(cfg.Training), cfg.Inference.Model, cfg.Run.Seed}),
	}
	p.started.ConfigHash = p.hash
	p.runner = cfg.Engine.Runner(p.hash)
	if sc.Eval.Suite != "" {
		p.started.EvalSuites = []string{sc.Eval.Suite}
	}
	p.stages = []engine.Stage{
		control.NewStage(control.StageConfig{Log: log, Store: st, Config: cc}),
		synth.New(sy),
		audit.NewStage(audit.StageConfig{Store: st, Trial: opt, Settings: sc.Audit, References: refs}),
		rollout.NewStage(rollout.StageConfig{Store: st, Trial: opt, Episode: Episode(cfg),
			TrainTemperature: cfg.Stages.Rollout.TrainTemperature, EpisodeVersion: cfg.Stages.Rollout.EpisodeVersion, Lineage: log.Lineage, Policies: policies}),
		rw,
		critic.New(critic.Config{Store: st, Trainer: tr, GAE: trainer.GAE{Gamma: tc.Gamma, Lambda: tc.Lambda, Baseline: tc.Baseline},
			FromPolicy: tc.CriticInit == config.CriticFromPolicy, Initial: initial, Lineage: lineage}),
		ppo.New(ppo.Config{Store: st, Trainer: tr, Initial: initial, Lineage: lineage, MaxStaleness: tc.MaxStaleness}),
		sft.New(sft.Config{Store: st, Trainer: tr, Initial: initial, Lineage: lineage}),
	}
	if len(suites) > 0 {
		p.stages = append(p.stages, eval.NewStage(eval.StageConfig{Log: log, Store: st, Trial: opt, Suites: suites, MaxTurns: sc.Control.MaxTurns}))
	}
	return p, nil
}

// Stages are every stage of the run: control, synth, audit, rollout,
// reward, critic, ppo, sft, then eval when the run has a suite.
func (p *Pipeline) Stages() []engine.Stage { return p.stages }

// Stage returns the stage called name.
func (p *Pipeline) Stage(name string) (engine.Stage, error) {
	var names []string
	for _, s := range p.stages {
		if s.Name() == name {
			return s, nil
		}
		names = append(names, s.Name())
	}
	return nil, fmt.Errorf("unknown stage %q (one of %v)", name, names)
}

// Started is the payload of the run.started event that opens the run.
func (p *Pipeline) Started() schemas.RunStartedPayload { return p.started }

// Hash identifies the part of the configuration that shapes the run's
// events (the stages, training, the model's shape and the run seed):
// runners take it as their ConfigHash, so a changed setting makes new
// events rather than being deduplicated against the old ones.
func (p *Pipeline) Hash() string { return p.hash }

// RunnerConfig is how a process runs s of the run called run: a serial
// stage (engine.Serial) for run alone when run is set, as the process
// leases it for that run; every other stage, and a serial one without a
// run, over every run; with own, every stage for run alone, so that runs
// of other configurations in one process never handle each other's
// events.
func (p *Pipeline) RunnerConfig(s engine.Stage, run string, own bool) engine.RunnerConfig {
	rc := p.runner
	if engine.IsSerial(s) || own {
		rc.Run = run
	}
	return rc
}

// hashed is what Hash digests. Its JSON encoding, field names and order
// included, is what event ids derive from: a change to it, or to the Go
// names of the settings it holds, changes every event of every run.
type hashed struct {
	Stages   config.Stages
	Training config.Training
	Model    config.InferenceModel
	Seed     uint64
}

// hashedTraining is t without the settings that cannot change a run
// under its other settings: the importance cap of a synchronous run.
func hashedTraining(t config.Training) config.Training {
	if t.MaxStaleness == 0 {
		t.ImportanceCap = 0
	}
	return t
}

// Episode bounds the rollouts of cfg's run: stages.rollout, within the
// model's context.
func Episode(cfg config.Config) agent.Config {
	ec := cfg.Stages.Rollout.Config()
	ec.Context = min(ec.Context, cfg.Inference.Model.Context)
	return ec
}

// ConfigHash is a stable short digest of v's JSON encoding: the first 8
// bytes of its SHA-256, in hex.
func ConfigHash(v any) string {
	data, _ := json.Marshal(v)
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:8])
}

// synthConfig wires the synth stage's generator. The llm generator's API
// key is read from its environment variable here, once, and goes nowhere
// but the request header.
func synthConfig(c synth.Settings, st store.ObjectStore, opt trial.Options) (synth.Config, error) {
	cfg := synth.Config{Store: st, Trial: opt, Generator: c.Generator, Library: taskgen.Library(c.Library), Candidates: c.Candidates}
	if c.Generator != synth.LLM {
		return cfg, nil
	}
	l := c.LLM
	var key string
	if l.APIKeyEnv != "" {
		if key = os.Getenv(l.APIKeyEnv); key == "" {
			return cfg, fmt.Errorf("stages.synth.llm.api_key_env: $%s is empty or not set", l.APIKeyEnv)
		}
	}
	cfg.LLM = &synth.LLMConfig{LLMSettings: l, Client: &chat.Client{URL: l.URL, APIKey: key, Timeout: l.Timeout}}
	return cfg, nil
}

// newPolicies resolves a run's policy versions: the checkpoint of the
// nearest run of its lineage that stores the version (a branch samples its
// parent's until it trains its own), version 0 being the configured
// initial policy, stored once when no run of the lineage has it. Each
// checkpoint is loaded once. The reference backend serves each version in
// process; remote ones (sglang, vllm) are a pool of engines whose weights
// are swapped to the version an episode holds (inference.Pool), exported
// to weightsDir for them to load. With external
// set, the initial checkpoint there is of an external architecture: its
// files are stored as version 0 as they are, and of every version only
// the tokenizer is read.
func newPolicies(st store.ObjectStore, ic config.Inference, weightsDir string, initial func(context.Context) (*moe.Checkpoint, error), external string, lineage update.Lineage) (rollout.Policies, error) {
	prec, err := moe.ParsePrecision(ic.Precision)
	if err != nil {
		return nil, err
	}
	var engines *inference.Pool
	if ic.Backend != inference.BackendReference {
		if err := checkWeightsDir(weightsDir); err != nil {
			return nil, err
		}
		if engines, err = inference.OpenPool(context.Background(), InferenceOptions(ic)); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	cache := map[string]rollout.Policy{}
	return func(ctx context.Context, run string, v int64) (rollout.Policy, error) {
		runs, err := lineage.Of(ctx, run)
		if err != nil {
			return rollout.Policy{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		var prefix string
		if external != "" && v == 0 {
			prefix, err = checkpoint.EnsureExternalPolicy(ctx, st, runs, external)
		} else {
			prefix, err = checkpoint.EnsurePolicy(ctx, st, runs, v, initial)
		}
		if err != nil {
			return rollout.Policy{}, err
		}
		if p, ok := cache[prefix]; ok {
			return p, nil
		}
		var p rollout.Policy
		var export func(ctx context.Context, dir string) (string, error)
		if external != "" {
			tok, err := checkpoint.LoadTokenizer(ctx, st, prefix)
			if err != nil {
				return rollout.Policy{}, err
			}
			p = rollout.Policy{Tokenizer: tok, Experts: ic.Model.Experts}
			export = func(ctx context.Context, dir string) (string, error) {
				return checkpoint.Export(ctx, st, prefix, dir)
			}
		} else {
			ck, err := checkpoint.LoadPolicy(ctx, st, prefix)
			if err != nil {
				return rollout.Policy{}, err
			}
			p = rollout.Policy{Tokenizer: ck.Tokenizer, Experts: ck.Model.Cfg.Experts}
			if engines == nil {
				p.Engine = inference.NewReference(ck.Model, ck.Tokenizer, prec, fmt.Sprint(v))
			}
			export = func(_ context.Context, dir string) (string, error) { return exportWeights(ck, dir) }
		}
		if engines != nil {
			path := func(ctx context.Context) (string, error) {
				return export(ctx, filepath.Join(weightsDir, run, fmt.Sprintf("v%06d", v)))
			}
			p.Hold = func(ctx context.Context) (inference.Engine, func(), error) {
				return engines.Hold(ctx, fmt.Sprint(v), path)
			}
		}
		cache[prefix] = p
		return p, nil
	}, nil
}

// checkWeightsDir refuses a weights directory t1 cannot write policy
// versions into, before anything runs: the engines would otherwise fail
// at the first load, an iteration in.
func checkWeightsDir(dir string) error {
	if dir == "" {
		return errors.New("inference.weights_dir: required for a remote engine: a directory t1 writes and the engine reads")
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("inference.weights_dir: %w (create it on storage the engine's host reads too)", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("inference.weights_dir: %s is not a directory", dir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("inference.weights_dir: %s is not writable by t1 (uid %d): %w", dir, os.Getuid(), err)
	}
	return nil
}

// exportWeights writes ck, without optimiser state, as a checkpoint
// directory at dir for an engine to load (checkpoint.ExportDir).
func exportWeights(ck *moe.Checkpoint, dir string) (string, error) {
	bare := *ck
	bare.Optimizer = nil
	dir, err := checkpoint.ExportDir(dir, bare.SaveDir)
	if err != nil {
		return "", fmt.Errorf("inference.weights_dir: %w", err)
	}
	return dir, nil
}

// InferenceOptions converts the inference section.
func InferenceOptions(in config.Inference) inference.Options {
	return inference.Options{Backend: in.Backend, URL: in.URL, URLs: in.URLs, ServedModel: in.ServedModel, Timeout: in.Timeout, LoadTimeout: in.LoadTimeout,
		VLLMLogprobsMode: in.VLLMLogprobsMode,
		Checkpoint:       in.Checkpoint, Precision: in.Precision, Model: in.Model.Shape()}
}

// ModelShape is the model's shape and model_type: the checkpoint's
// config.json when there is a checkpoint (a local directory or an
// object-store prefix; an external MoE's read by moe.ParseShape), else
// the configured reference model.
func ModelShape(configured config.InferenceModel, checkpoint string, st store.ObjectStore) (moe.Config, string, error) {
	if checkpoint == "" {
		return configured.Shape(), moe.ModelType, nil
	}
	var b []byte
	var err error
	if inference.IsLocalCheckpoint(checkpoint) {
		b, err = os.ReadFile(filepath.Join(checkpoint, moe.ConfigFile))
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b, err = readObject(ctx, st, path.Join(checkpoint, moe.ConfigFile))
	}
	if err != nil {
		return moe.Config{}, "", fmt.Errorf("inference.checkpoint %q: %w", checkpoint, err)
	}
	c, modelType, err := moe.ParseShape(b)
	if err != nil {
		return moe.Config{}, "", fmt.Errorf("inference.checkpoint %q: %w", checkpoint, err)
	}
	return c, modelType, nil
}

func readObject(ctx context.Context, st store.ObjectStore, key string) ([]byte, error) {
	if st == nil {
		return nil, fmt.Errorf("not a local directory holding %s, and no object store is open", moe.ConfigFile)
	}
	rc, _, err := st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 1<<20))
}

// storeEnv hands an exec trainer the run's object store: the endpoint,
// bucket, prefix, region and keys st was opened with (trainer.StoreAccess),
// so that it reads the batch and checkpoints the job names by itself.
// A store of another kind hands over nothing.
func storeEnv(st store.ObjectStore) []string {
	s, ok := st.(*s3.Store)
	if !ok {
		return nil
	}
	c := s.Config()
	return trainer.StoreAccess{Endpoint: c.Endpoint, Secure: c.Secure, Bucket: c.Bucket, Prefix: c.Prefix, Region: c.Region,
		AccessKey: c.AccessKey, SecretKey: c.SecretKey}.Env()
}
