package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/harbor/verifier"
	"github.com/t1pipe/t1/infra/chat"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/infra/store"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/runners/local"
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
	"github.com/t1pipe/t1/trainer"
	"github.com/t1pipe/t1/trial"
)

func runCmd(g *globals) *cobra.Command {
	var noStages bool
	cmd := &cobra.Command{
		Use:   "run [--no-stages]",
		Short: "Run the whole pipeline in one process on the configured (by default embedded) NATS and S3",
		Long: `Runs every stage in this process — control, synth, audit, rollout, reward, critic, ppo and
eval — on embedded NATS and S3 unless the configuration points elsewhere, with the reference
MoE as the policy. Progress goes to stderr; a summary and the report's path go to stdout.
Interrupting stops cleanly; running again with the same configuration resumes from the log.
With --no-stages this process runs no stage: it starts the run and follows it to its end while
the stages run elsewhere as ` + "`t1 worker --stage S`" + ` processes on the same NATS and S3 (for
example beside ` + "`t1 infra up`" + ` on the data directory).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.load()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			in, err := local.Open(ctx, cfg, local.Options{Serve: true})
			if err != nil {
				return err
			}
			defer in.Close()
			return runPipeline(ctx, cmd, g, in, !noStages)
		},
	}
	cmd.Flags().BoolVar(&noStages, "no-stages", false, "start and follow the run only; t1 worker processes run its stages")
	return cmd
}

// pipelineHash identifies the configuration that shapes a run's events.
func pipelineHash(cfg config.Config) string {
	return configHash(struct {
		Stages   config.Stages
		Training config.Training
		Model    config.InferenceModel
		Seed     uint64
	}{cfg.Stages, cfg.Training, cfg.Inference.Model, cfg.Run.Seed})
}

// pipeline is every stage of a run, wired from the configuration.
type pipeline struct {
	stages  []engine.Stage
	single  map[string]bool // stages that fold the log and run one handler at a time
	started schemas.RunStartedPayload
}

func buildPipeline(ctx context.Context, in *local.Infra) (*pipeline, error) {
	cfg := in.Config
	st := in.Store
	sc := cfg.Stages
	be, err := sandbox.ByName(cfg.Sandbox.Backend)
	if err != nil {
		return nil, err
	}
	opt := trial.Options{Backend: be, Limits: cfg.Sandbox.SandboxLimits()}
	mcfg := moeConfig(cfg.Inference.Model)
	dims := schemas.ModelDims{Vocab: mcfg.Vocab, Layers: mcfg.Layers, TopK: mcfg.TopK, Experts: mcfg.Experts}
	rf, err := verifier.NewRewardFunc(verifier.Mode(sc.Reward.Mode), sc.Reward.Scale)
	if err != nil {
		return nil, err
	}
	initial := func(ctx context.Context) (*moe.Checkpoint, error) {
		return inference.LoadCheckpoint(ctx, cfg.Inference.Checkpoint, mcfg, st)
	}
	tc := cfg.Training
	tr, err := trainer.New(st, trainer.Options{Backend: tc.Trainer.Backend, Exec: trainer.Exec{Argv: tc.Trainer.Command, Dir: tc.Trainer.Dir},
		Reference: trainer.ReferenceOptions{
			Actor: trainer.ActorOptions{Epochs: tc.Epochs, Clip: tc.Clip, Adam: tc.Adam(), MaxGradNorm: tc.MaxGradNorm, Replay: tc.Replay},
			Critic: trainer.CriticOptions{Model: mcfg, Adam: tc.CriticAdam(), ValueClip: tc.ValueClip, Epochs: tc.CriticEpochs,
				MaxGradNorm: tc.MaxGradNorm, WarmupSteps: tc.Warmup.Steps, WarmupEV: tc.Warmup.EV},
			SFT: trainer.SFTOptions{Adam: tc.SFTAdam(), MaxGradNorm: tc.MaxGradNorm, Batch: tc.SFTBatch},
		}})
	if err != nil {
		return nil, err
	}

	cc := control.Config{
		PoolTarget: sc.Control.PoolTarget, Rounds: sc.Control.Rounds, Seeds: sc.Control.Seeds, PerSeed: sc.Control.PerSeed,
		Iterations: sc.Control.Iterations, TasksPerIteration: sc.Control.TasksPerIteration, Attempts: sc.Control.Attempts,
		MinSuccess: sc.Control.MinSuccess, MaxTurns: sc.Control.MaxTurns, EvalEvery: sc.Control.EvalEvery,
		EvalBaseline: sc.Control.EvalBaseline, EvalSuite: sc.Eval.Suite, EvalAttempts: sc.Eval.Attempts, Model: dims,
		MaxSimilarity: sc.Audit.MaxSimilarity, SFTSteps: sc.Control.SFTSteps,
	}
	suites := map[string]eval.Suite{}
	var refs []harbor.Reference
	if sc.Eval.Suite != "" {
		dirs, err := absAll(sc.Eval.Dirs)
		if err != nil {
			return nil, err
		}
		su := eval.Suite{Builtin: sc.Eval.Tasks > 0, Tasks: sc.Eval.Tasks, Rounds: sc.Eval.Rounds, Seed: sc.Eval.Seed, Dirs: dirs}
		suites[sc.Eval.Suite] = su
		// Training tasks must stay apart from every task of the suite.
		if refs, err = eval.References(su); err != nil {
			return nil, fmt.Errorf("stages.eval: %w", err)
		}
	}
	sy, err := synthConfig(sc.Synth, st, opt)
	if err != nil {
		return nil, err
	}
	ec := rollout.Config{
		MaxNewTokens: sc.Rollout.MaxNewTokens, Context: min(sc.Rollout.Context, mcfg.Context), CommandTimeout: sc.Rollout.CommandTimeout,
		MaxObservation: sc.Rollout.MaxObservation, Sampling: inference.SamplingParams{Temperature: sc.Rollout.Temperature, TopP: sc.Rollout.TopP},
	}
	p := &pipeline{
		single: map[string]bool{"control": true, "eval": true},
		started: schemas.RunStartedPayload{Seed: cfg.Run.Seed, Model: dims, Iterations: sc.Control.Iterations,
			RewardScale: sc.Reward.Scale},
	}
	if sc.Eval.Suite != "" {
		p.started.EvalSuites = []string{sc.Eval.Suite}
	}
	p.stages = []engine.Stage{
		control.NewStage(control.StageConfig{Log: in.Log, Store: st, Config: cc}),
		synth.New(sy),
		audit.NewStage(audit.StageConfig{Store: st, Trial: opt, References: refs, Rerun: sc.Audit.Rerun,
			Audit: audit.Config{Threshold: sc.Audit.Threshold, MaxSimilarity: sc.Audit.MaxSimilarity}}),
		rollout.NewStage(rollout.StageConfig{Store: st, Trial: opt, Episode: ec, Policies: newPolicies(st, cfg.Inference, initial)}),
		reward.New(reward.Config{Store: st, Trial: opt, Reward: rf, Log: in.Log}),
		critic.New(critic.Config{Store: st, Trainer: tr, GAE: trainer.GAE{Gamma: tc.Gamma, Lambda: tc.Lambda}}),
		ppo.New(ppo.Config{Store: st, Trainer: tr, Initial: initial}),
		sft.New(sft.Config{Store: st, Trainer: tr, Initial: initial}),
	}
	if sc.Eval.Suite != "" {
		p.stages = append(p.stages, eval.NewStage(eval.StageConfig{Log: in.Log, Store: st, Trial: opt, Suites: suites, MaxTurns: sc.Control.MaxTurns}))
	}
	return p, nil
}

// synthConfig wires the synth stage's generator. The llm generator's API
// key is read from its environment variable here, once, and goes nowhere
// but the request header.
func synthConfig(c config.Synth, st store.ObjectStore, opt trial.Options) (synth.Config, error) {
	cfg := synth.Config{Store: st, Trial: opt, Generator: c.Generator}
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
	cfg.LLM = &synth.LLMConfig{Client: &chat.Client{URL: l.URL, APIKey: key, Timeout: l.Timeout}, Model: l.Model,
		Temperature: l.Temperature, MaxTokens: l.MaxTokens, Seed: l.Seed}
	return cfg, nil
}

// newPolicies resolves a run's policy versions: version 0 is the
// configured initial policy, stored once as the run's version 0; later
// versions are the checkpoints PPO stored. Each is loaded once.
func newPolicies(st store.ObjectStore, ic config.Inference, initial func(context.Context) (*moe.Checkpoint, error)) rollout.Policies {
	var mu sync.Mutex
	cache := map[string]rollout.Policy{}
	return func(ctx context.Context, run string, v int64) (rollout.Policy, error) {
		key := fmt.Sprintf("%s/%d", run, v)
		mu.Lock()
		defer mu.Unlock()
		if p, ok := cache[key]; ok {
			return p, nil
		}
		if v == 0 {
			if err := trainer.EnsurePolicy(ctx, st, run, 0, initial); err != nil {
				return rollout.Policy{}, err
			}
		}
		ck, err := trainer.LoadCheckpoint(ctx, st, trainer.PolicyPrefix(run, v))
		if err != nil {
			return rollout.Policy{}, err
		}
		prec, err := moe.ParsePrecision(ic.Precision)
		if err != nil {
			return rollout.Policy{}, err
		}
		p := rollout.Policy{Engine: inference.NewReference(ck.Model, ck.Tokenizer, prec, fmt.Sprint(v)), Tokenizer: ck.Tokenizer, Experts: ck.Model.Cfg.Experts}
		cache[key] = p
		return p, nil
	}
}

type pipelineSummary struct {
	Run        string            `json:"run"`
	Status     string            `json:"status"` // completed | failed | stopped
	Reason     string            `json:"reason,omitempty"`
	Events     map[string]uint64 `json:"events"`
	Evals      []evalLine        `json:"evals,omitempty"`
	Dead       uint64            `json:"dead_letters"`
	Elapsed    time.Duration     `json:"elapsed_ns"`
	PolicyLast int64             `json:"policy_version"`
	reportFiles
}

type evalLine struct {
	Suite         string  `json:"suite"`
	PolicyVersion int64   `json:"policy_version"`
	Attempts      int     `json:"attempts"`
	ResolveRate   float64 `json:"resolve_rate"`
	MeanReward    float64 `json:"mean_reward"`
	MeanTurns     float64 `json:"mean_turns"`
}

func runPipeline(ctx context.Context, cmd *cobra.Command, g *globals, in *local.Infra, stages bool) error {
	sum, err := executePipeline(ctx, cmd.ErrOrStderr(), in, stages)
	if err != nil || sum == nil {
		return err
	}
	if g.json {
		if err := printJSON(cmd, sum); err != nil {
			return err
		}
	} else {
		printPipelineSummary(cmd.OutOrStdout(), *sum)
	}
	if sum.Status == "failed" {
		return fmt.Errorf("run %s failed: %s (t1 events list --run %s --type run.failed)", sum.Run, sum.Reason, sum.Run)
	}
	return nil
}

// executePipeline runs in.Config's run to its end, with every stage in
// this process when stages is set (otherwise workers elsewhere run them),
// writing progress to w, and returns its summary once the report is
// written; nil when ctx ends first (a later call resumes the run).
func executePipeline(ctx context.Context, w io.Writer, in *local.Infra, stages bool) (*pipelineSummary, error) {
	cfg := in.Config
	run := cfg.Run.ID
	p, err := buildPipeline(ctx, in)
	if err != nil {
		return nil, err
	}
	hash := pipelineHash(cfg)

	stageCtx, stopStages := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopStages(); wg.Wait() }()
	errs := make(chan error, len(p.stages))
	mine := p.stages
	if !stages {
		mine = nil
	}
	for _, s := range mine {
		rc := local.RunnerConfig(cfg.Engine, hash)
		if p.single[s.Name()] {
			rc.Concurrency = 1
		}
		r := engine.NewRunner(in.Log, s, rc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(stageCtx); err != nil {
				errs <- fmt.Errorf("stage %s: %w", s.Name(), err)
			}
		}()
	}
	exists, err := hasEvent(ctx, in.Log, engine.Subject(run, schemas.RunStarted))
	if err != nil {
		return nil, err
	}
	if !exists {
		root, err := engine.NewRootEvent(run, schemas.RunStarted, hash, p.started)
		if err != nil {
			return nil, err
		}
		if _, err := in.Log.Publish(ctx, root); err != nil {
			return nil, err
		}
	}

	begin := time.Now()
	prog := newPipelineProgress(w, cfg.Stages)
	sum := pipelineSummary{Run: run}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		counts, err := runCounts(ctx, in.Log, run)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		sum.Events = counts
		prog.update(counts, time.Since(begin))
		if counts[schemas.RunCompleted] > 0 {
			sum.Status = "completed"
			break
		}
		if counts[schemas.RunFailed] > 0 {
			sum.Status = "failed"
			break
		}
		select {
		case <-ctx.Done():
			prog.finish()
			fmt.Fprintf(w, "stopped; run `t1 run` again to resume run %s\n", run)
			return nil, nil
		case err := <-errs:
			return nil, err
		case <-tick.C:
		}
	}
	prog.finish()
	sum.Elapsed = time.Since(begin)
	r, err := report.Load(ctx, in.Log, in.Store, run)
	if err != nil {
		return nil, err
	}
	sum.Reason, sum.PolicyLast, sum.Dead = r.Reason, r.PolicyVersion, r.DeadLetters
	for _, e := range r.Evals {
		sum.Evals = append(sum.Evals, evalLine{e.Suite, e.PolicyVersion, e.Attempts, e.ResolveRate, e.MeanReward, e.MeanTurns})
	}
	if sum.reportFiles, err = saveReport(ctx, in, []*report.Run{r}, ""); err != nil {
		return nil, err
	}
	return &sum, nil
}

// deadLetters counts the run's dead letters.
func deadLetters(ctx context.Context, in *local.Infra, run string) uint64 {
	var n uint64
	dead, err := in.Log.DeadLetters().Info(ctx, jetstream.WithSubjectFilter(strings.ToLower(in.Config.Bus.Stream.Name)+"dlq."+run+".>"))
	if err == nil {
		for _, c := range dead.State.Subjects {
			n += c
		}
	}
	return n
}

// stage returns the pipeline's stage called name.
func (p *pipeline) stage(name string) (engine.Stage, error) {
	var names []string
	for _, s := range p.stages {
		if s.Name() == name {
			return s, nil
		}
		names = append(names, s.Name())
	}
	return nil, fmt.Errorf("unknown stage %q (one of %v)", name, names)
}

// failedTotal counts the run's failed events of every type.
func failedTotal(counts map[string]uint64) uint64 {
	var n uint64
	for t, c := range counts {
		if strings.HasSuffix(t, ".failed") && t != schemas.RunFailed {
			n += c
		}
	}
	return n
}

type pipelineProgress struct {
	w    io.Writer
	sc   config.Stages
	tty  bool
	last time.Time
}

func newPipelineProgress(w io.Writer, sc config.Stages) *pipelineProgress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &pipelineProgress{w: w, sc: sc, tty: tty}
}

func (p *pipelineProgress) update(c map[string]uint64, elapsed time.Duration) {
	if !p.tty && time.Since(p.last) < 5*time.Second {
		return // logs and CI get a line every few seconds, terminals a live line
	}
	p.last = time.Now()
	stage := "synth"
	switch {
	case c[schemas.RunCompleted]+c[schemas.RunFailed] > 0:
		stage = "done"
	case c[schemas.PolicyUpdated] > 0 || c[schemas.BatchReady] > 0:
		stage = fmt.Sprintf("train (iteration %d/%d)", min(int(c[schemas.PolicyUpdated])+1, p.sc.Control.Iterations), p.sc.Control.Iterations)
	case c[schemas.SFTRequested] > c[schemas.SFTCompleted]:
		stage = "sft (fine-tuning on demonstrations)"
	case c[schemas.PoolSealed] > 0 && c[schemas.RolloutRequested] > 0 && c[schemas.SFTRequested] == 0 && p.sc.Control.SFTSteps > 0:
		stage = "sft (playing demonstrations)"
	case c[schemas.PoolSealed] > 0:
		stage = fmt.Sprintf("rollout (iteration 1/%d)", p.sc.Control.Iterations)
	case c[schemas.TaskAudited] > 0:
		stage = "synth + audit"
	}
	rate := float64(c[schemas.RewardScored]) / elapsed.Minutes()
	line := fmt.Sprintf("[%s] %s · tasks %d synthesised, %d discarded, %d audited · rollouts %d/%d scored (%.1f/min) · policy v%d · evals %d · %d failed",
		elapsed.Round(time.Second), stage, c[schemas.TaskSynthesized], c[schemas.SynthDiscarded], c[schemas.TaskAudited],
		c[schemas.RewardScored], c[schemas.RolloutRequested], rate, c[schemas.PolicyUpdated], c[schemas.EvalCompleted], failedTotal(c))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *pipelineProgress) finish() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

func printPipelineSummary(w io.Writer, s pipelineSummary) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s (%s)\n", s.Run, s.Status)
	if s.Reason != "" {
		fmt.Fprintf(tw, "reason\t%s\n", s.Reason)
	}
	for _, t := range []string{schemas.TaskSynthesized, schemas.SynthDiscarded, schemas.TaskAudited, schemas.RolloutCompleted,
		schemas.RewardScored, schemas.PolicyUpdated, schemas.EvalCompleted} {
		fmt.Fprintf(tw, "%s\t%d\n", t, s.Events[t])
	}
	fmt.Fprintf(tw, "failed events\t%d\n", failedTotal(s.Events))
	fmt.Fprintf(tw, "dead letters\t%d\n", s.Dead)
	for _, e := range s.Evals {
		fmt.Fprintf(tw, "eval %s v%d\tresolve %.2f  partial credit %.2f  turns %.1f  (%d attempts)\n", e.Suite, e.PolicyVersion, e.ResolveRate, e.MeanReward, e.MeanTurns, e.Attempts)
	}
	fmt.Fprintf(tw, "elapsed\t%s\n", s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(tw, "report\t%s (object %s)\n", s.Report, s.ReportKey)
	fmt.Fprintf(tw, "report html\t%s (object %s)\n", s.HTML, s.HTMLKey)
	tw.Flush()
}

func configHash(v any) string {
	data, _ := json.Marshal(v)
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:8])
}

func hasEvent(ctx context.Context, l *engine.Log, subject string) (bool, error) {
	_, err := l.Stream().GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", subject, err)
	}
	return true, nil
}

// runCounts counts the run's events by type from the stream's per-subject
// totals, so progress costs one request however long the run.
func runCounts(ctx context.Context, l *engine.Log, run string) (map[string]uint64, error) {
	info, err := l.Stream().Info(ctx, jetstream.WithSubjectFilter(engine.Subject(run, ">")))
	if err != nil {
		return nil, err
	}
	prefix := engine.Subject(run, "")
	out := map[string]uint64{}
	for subj, n := range info.State.Subjects {
		out[strings.TrimPrefix(subj, prefix)] += n
	}
	return out, nil
}
