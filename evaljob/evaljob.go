// Package evaljob evaluates one policy version of a run on a suite as a
// job of its own (`t1 eval`), beside whatever else runs: it writes
// eval_results and eval.completed under the run as the run's own
// evaluations do, running eval, rollout and reward in this process for
// this evaluation alone.
//
// The contract with the rest of the log: the job's eval.requested is a
// root event derived from the suite, version and attempts, so asking
// again finds the same evaluation; its stages work on consumers of their
// own (<stage>_<run>_<id>), which start at that request and hand the
// stages only the events that descend from it (engine.Chain), unless the
// log has shared consumers of rollout and reward, whose workers then run
// the job's attempts beside theirs. The consumers go once the evaluation
// ends. The job holds the run's eval lease, so it is refused (exit 4)
// while another process runs eval for the run.
package evaljob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/report"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/eval"
)

// Options names the evaluation a job runs.
type Options struct {
	Run string
	// Policy is the version: v0, v1, … or a bare number.
	Policy string
	// Suite is the configured suite's name or a directory of Harbor tasks.
	Suite string
	// Attempts per task; 0 takes stages.eval.attempts.
	Attempts int
}

// Summary is what `t1 eval` prints when it ends.
type Summary struct {
	Run           string `json:"run"`
	Suite         string `json:"suite"`
	PolicyVersion int64  `json:"policy_version"`
	Attempts      int    `json:"attempts"`
	// Status is completed (this job evaluated), done (an earlier job or the
	// run itself already had; nothing was redone) or failed.
	Status      string        `json:"status"`
	Reason      string        `json:"reason,omitempty"`
	Scored      int           `json:"scored"`
	Unscored    int           `json:"unscored,omitempty"` // attempts whose rollout or reward failed
	Tasks       int           `json:"tasks"`
	ResolveRate float64       `json:"resolve_rate"`
	MeanReward  float64       `json:"mean_reward"`
	MeanTurns   float64       `json:"mean_turns"`
	Results     []string      `json:"results,omitempty"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	ExitCode    int           `json:"exit_code"`
}

// Run evaluates as o asks, loading the configuration with load once the
// command line is known to be sound, and writes its progress to log. The
// summary it returns says how the job ended, the error's exit code
// included, whatever the error.
func Run(ctx context.Context, log io.Writer, load func() (config.Config, error), o Options) (*Summary, error) {
	begin := time.Now()
	sum := &Summary{Run: o.Run, Suite: o.Suite}
	err := run(ctx, log, load, o, sum)
	sum.Elapsed = time.Since(begin)
	sum.ExitCode = exit.Code(ctx, err)
	if err != nil {
		sum.Status, sum.Reason = "failed", exit.Line(err)
		if sum.ExitCode == exit.Stopped {
			sum.Status = "stopped"
		}
	}
	return sum, err
}

var policyVersion = regexp.MustCompile(`^v?([0-9]{1,9})$`)

func run(ctx context.Context, log io.Writer, load func() (config.Config, error), o Options, sum *Summary) error {
	run, policy, suiteArg, attempts := o.Run, o.Policy, o.Suite, o.Attempts
	if run == "" || policy == "" || suiteArg == "" {
		return exit.Configf("--run, --policy and --suite are required")
	}
	if keys.ValidRun(run) != nil {
		return exit.Configf("--run %q is not a run id (1-64 characters from a-z, 0-9 and '-')", run)
	}
	m := policyVersion.FindStringSubmatch(policy)
	if m == nil {
		return exit.Configf("--policy %q: want a version such as v0 or v3", policy)
	}
	version, _ := strconv.ParseInt(m[1], 10, 64)
	sum.PolicyVersion = version
	cfg, err := load()
	if err != nil {
		return err
	}
	if attempts == 0 {
		attempts = cfg.Stages.Eval.Attempts
	}
	if attempts < 1 || attempts > 100 {
		return exit.Configf("--attempts %d: want 1-100", attempts)
	}
	sum.Attempts = attempts
	// The suite is resolved before the embedded S3 gateway moves the
	// working directory.
	name, extra, err := resolveSuite(cfg.Stages.Eval, suiteArg)
	if err != nil {
		return err
	}
	sum.Suite = name
	in, err := local.Open(ctx, cfg, local.Options{})
	if err != nil {
		return exit.InfraError(err)
	}
	defer in.Close()
	if ok, err := in.Log.HasEvent(ctx, run, schemas.RunStarted); err != nil {
		return exit.InfraError(err)
	} else if !ok {
		if err := known.Run(ctx, in.Log, nil, run); err != nil {
			return err
		}
		return exit.Configf("run %q has no run.started in the log (t1 runs lists the runs)", run)
	}
	// Version 0 is stored on first use; any other must be.
	if version > 0 {
		lineage, err := in.Log.Lineage(ctx, run)
		if err != nil {
			return exit.InfraError(err)
		}
		_, err = checkpoint.EnsurePolicy(ctx, in.Store, lineage, version, nil)
		if _, bad := errors.AsType[*batch.BadInputError](err); bad {
			return known.Unknown("policy version", "policy versions of run "+run, fmt.Sprintf("v%d", version), policyVersions(ctx, in.Log, run))
		} else if err != nil {
			return exit.InfraError(err)
		}
	}
	st, err := evalState(ctx, in.Log, run, name, version)
	if err != nil {
		return err
	}
	if st.request != nil && st.attempts != attempts {
		return exit.Configf("run %s already has an evaluation of v%d on %s with %d attempts per task; ask for those, or evaluate on another suite",
			run, version, name, st.attempts)
	}
	if st.completed != nil {
		if st.request != nil {
			// A job stopped between the evaluation's end and its
			// consumers' deletion left them.
			if err := dropJobConsumers(ctx, in.Log, *st.request); err != nil {
				return err
			}
		}
		sum.Status = "done"
		return sum.fill(st.completed)
	}
	if st.failed != "" {
		if err := dropJobConsumers(ctx, in.Log, *st.request); err != nil {
			return err
		}
		return evalFailed(run, version, name, st.failed)
	}

	var opts []pipeline.Option
	opts = append(opts, pipeline.WithWorkDir(in.WorkDir), pipeline.EvaluationOnly())
	if extra != nil {
		opts = append(opts, pipeline.WithSuite(name, *extra))
	}
	p, err := pipeline.Build(cfg, in.Log, in.Store, opts...)
	if err != nil {
		return exit.With(exit.Config, err)
	}
	var stages []engine.Stage
	for _, n := range jobStages {
		s, err := p.Stage(n)
		if err != nil {
			return exit.Configf("%v (stages.eval.suite is empty and no directory was given)", err)
		}
		stages = append(stages, s)
	}
	stageCtx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(stages)+1)
	release, err := in.Log.HoldStageLeases(stageCtx, stages[:1], run, engine.DefaultLeaseTTL, func(err error) {
		select {
		case errs <- exit.InfraError(fmt.Errorf("lease lost: %w", err)):
		default:
		}
	})
	if err != nil {
		return exit.InfraError(err)
	}
	defer release()
	req := st.request
	if req == nil {
		iter, err := evaluatedIteration(ctx, in.Log, run, version)
		if err != nil {
			return exit.InfraError(err)
		}
		ev, err := engine.NewRootEvent(run, schemas.EvalRequested, fmt.Sprintf("job/%s/v%d/k%d", name, version, attempts),
			schemas.EvalRequestedPayload{Suite: name, PolicyVersion: version, Iteration: iter, Attempts: attempts})
		if err != nil {
			return err
		}
		// A duplicate of an earlier publish answers with the earlier
		// sequence, where the job's consumers then start.
		if ev, err = in.Log.Publish(ctx, ev); err != nil {
			return exit.InfraError(err)
		}
		req = &ev
	}
	// The job's stages handle its evaluation alone, from its request on:
	// the log's shared consumers, made for the first time in a data
	// directory whose runs had consumers of their own, would hand it every
	// run's history to redo, and the run's consumers its other work (its
	// training, which may go on elsewhere).
	chain, err := in.Log.ChainOf(ctx, *req)
	if err != nil {
		return exit.InfraError(err)
	}
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, s := range stages {
		// Where the log's shared consumer of rollout or reward exists,
		// workers on it are handed the job's attempts: the job works on it
		// beside them, so that each attempt runs once.
		shared := false
		if s.Name() != jobStages[0] {
			if shared, err = in.Log.HasConsumer(ctx, engine.Durable(s.Name(), "")); err != nil {
				return exit.InfraError(err)
			}
		}
		rc, handled := p.RunnerConfig(s, run, false), s
		if !shared {
			rc = p.RunnerConfig(s, run, true)
			rc.Durable, rc.From = jobDurable(s.Name(), *req), engine.ReplayFrom{Seq: req.Seq}
			handled = chain.Only(s)
		}
		r := engine.NewRunner(in.Log, handled, rc)
		wg.Go(func() {
			if err := r.Run(stageCtx); err != nil {
				select {
				case errs <- exit.InfraError(fmt.Errorf("stage %s: %w", s.Name(), err)):
				default:
				}
			}
		})
	}
	// Once the evaluation has ended its consumers have nothing left to
	// deliver; the stages stop first, or they would make them again.
	end := func() error {
		stop()
		wg.Wait()
		return dropJobConsumers(ctx, in.Log, *req)
	}
	fmt.Fprintf(log, "t1 eval: evaluating %s v%d on %s, %d attempts per task\n", run, version, name, attempts)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return exit.ErrStopped
		case err := <-errs:
			return err
		case <-tick.C:
		}
		st, err := evalState(ctx, in.Log, run, name, version)
		if err != nil {
			if ctx.Err() != nil {
				return exit.ErrStopped
			}
			return err
		}
		switch {
		case st.completed != nil:
			if err := end(); err != nil {
				return err
			}
			sum.Status = "completed"
			return sum.fill(st.completed)
		case st.failed != "":
			if err := end(); err != nil {
				return err
			}
			return evalFailed(run, version, name, st.failed)
		}
	}
}

// jobStages are the stages `t1 eval` runs, the lease-holding eval first.
var jobStages = []string{"eval", "rollout", "reward"}

// jobDurable names the consumer of stage in the job that evaluates for
// req: the run's, told apart by the request, so that an interrupted job
// resumes on its consumers and jobs of other evaluations of the run get
// their own. No Durable(stage, run) has a second '_', so none is one of
// these.
func jobDurable(stage string, req engine.Event) string {
	return engine.Durable(stage, req.Run) + "_" + req.ID[:min(len(req.ID), 12)]
}

// dropJobConsumers deletes the consumers of the job that evaluates for
// req, those of a job that ended before it could included.
func dropJobConsumers(ctx context.Context, l *engine.Log, req engine.Event) error {
	names := make([]string, len(jobStages))
	for i, s := range jobStages {
		names[i] = jobDurable(s, req)
	}
	return exit.InfraError(l.DeleteConsumers(ctx, names))
}

func evalFailed(run string, version int64, suite, reason string) error {
	return exit.With(exit.Failed, fmt.Errorf("evaluation of %s v%d on %s failed: %s", run, version, suite, reason))
}

// fill takes the evaluation's figures; an evaluation none of whose
// attempts was scored is a failure.
func (s *Summary) fill(p *schemas.EvalCompletedPayload) error {
	s.Scored, s.Unscored, s.Tasks, s.ResolveRate, s.MeanReward, s.MeanTurns = p.Attempts, p.Unscored, p.Tasks, p.ResolveRate, p.MeanReward, p.MeanTurns
	for _, r := range p.Results {
		s.Results = append(s.Results, r.Key)
	}
	if p.Attempts == 0 {
		return exit.With(exit.Failed, fmt.Errorf("evaluation of %s v%d on %s completed without a scored attempt (t1 events list --run %s)", s.Run, s.PolicyVersion, s.Suite, s.Run))
	}
	return nil
}

// WriteText prints s as `t1 eval` ends.
func (s *Summary) WriteText(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "eval\t%s v%d on %s (%s)\n", s.Run, s.PolicyVersion, s.Suite, s.Status)
	fmt.Fprintf(tw, "resolve rate\t%.2f\n", s.ResolveRate)
	fmt.Fprintf(tw, "partial credit\t%.2f\n", s.MeanReward)
	fmt.Fprintf(tw, "mean turns\t%.1f\n", s.MeanTurns)
	fmt.Fprintf(tw, "attempts\t%d scored of %d tasks × %d\n", s.Scored, s.Tasks, s.Attempts)
	if s.Unscored > 0 {
		fmt.Fprintf(tw, "unscored\t%d (their rollout or reward failed: t1 events list --run %s --type rollout.failed)\n", s.Unscored, s.Run)
	}
	for _, r := range s.Results {
		fmt.Fprintf(tw, "results\t%s\n", r)
	}
	fmt.Fprintf(tw, "elapsed\t%s\n", s.Elapsed.Round(time.Millisecond))
	tw.Flush()
}

// evalLog is what a run's log holds of one evaluation.
type evalLog struct {
	// request is the evaluation's first eval.requested, asking for
	// attempts per task.
	request   *engine.Event
	attempts  int
	completed *schemas.EvalCompletedPayload
	failed    string
}

func evalState(ctx context.Context, l *engine.Log, run, suite string, version int64) (evalLog, error) {
	var st evalLog
	reqs := map[string]bool{}
	err := l.ReplayRun(ctx, run, []string{schemas.EvalRequested, schemas.EvalCompleted, engine.FailedType(schemas.EvalRequested)}, func(ev engine.Event) error {
		switch ev.Type {
		case schemas.EvalRequested:
			var p schemas.EvalRequestedPayload
			if ev.Decode(&p) == nil && p.Suite == suite && p.PolicyVersion == version && st.request == nil {
				st.request, st.attempts, reqs[ev.ID] = &ev, p.Attempts, true
			}
		case schemas.EvalCompleted:
			var p schemas.EvalCompletedPayload
			if ev.Decode(&p) == nil && p.Suite == suite && p.PolicyVersion == version {
				st.completed = &p
			}
		default:
			var f engine.Failure
			if ev.Decode(&f) == nil && reqs[f.EventID] {
				st.failed = f.Reason
			}
		}
		return nil
	})
	return st, exit.InfraError(err)
}

var notSuiteName = regexp.MustCompile(`[^a-z0-9-]+`)

// resolveSuite names the suite arg stands for: the configured suite, or a
// directory of Harbor tasks, named for its base name and what its tasks
// hash to (so the same tasks are the same suite wherever they lie).
func resolveSuite(es eval.Settings, arg string) (string, *eval.Suite, error) {
	if arg == es.Suite && es.Suite != "" {
		return arg, nil, nil
	}
	fi, err := os.Stat(arg)
	if err != nil || !fi.IsDir() {
		configured := "none is configured"
		if es.Suite != "" {
			configured = fmt.Sprintf("the configured one is %q", es.Suite)
		}
		return "", nil, exit.Configf("--suite %q is neither the configured suite (%s) nor a directory of Harbor tasks", arg, configured)
	}
	dir, err := filepath.Abs(arg)
	if err != nil {
		return "", nil, exit.Configf("--suite %s: %v", arg, err)
	}
	tasks, err := eval.LoadDirs([]string{dir})
	if err != nil {
		return "", nil, exit.Configf("--suite %s: %v", arg, err)
	}
	if len(tasks) == 0 {
		return "", nil, exit.Configf("--suite %s holds no Harbor task (a directory with task.toml, or a root of such directories)", arg)
	}
	h := sha256.New()
	for _, t := range tasks {
		fmt.Fprintln(h, t.ID)
	}
	base := strings.Trim(notSuiteName.ReplaceAllString(strings.ToLower(filepath.Base(dir)), "-"), "-")
	if len(base) > 32 {
		base = base[:32]
	}
	name := "dir-" + hex.EncodeToString(h.Sum(nil))[:8]
	if base != "" {
		name = base + "-" + hex.EncodeToString(h.Sum(nil))[:8]
	}
	return name, &eval.Suite{Dirs: []string{dir}}, nil
}

// policyVersions are the versions of run an evaluation can name: v0 and
// those the run made (t1 runs lists them too).
func policyVersions(ctx context.Context, log *engine.Log, run string) []string {
	have := []string{"v0"}
	runs, _ := report.Runs(ctx, log)
	for _, r := range runs {
		if r.Run == run {
			for _, v := range r.PolicyVersions {
				have = append(have, fmt.Sprintf("v%d", v))
			}
		}
	}
	return have
}

// evaluatedIteration is the iteration an evaluation of version is stored
// under, as the run's own are (stages/control): the one whose rollouts
// sample it, i+1 for the policy iteration i's update made, 0 for the base
// and the fine-tuned policy.
func evaluatedIteration(ctx context.Context, l *engine.Log, run string, version int64) (int, error) {
	iter := 0
	err := l.Replay(ctx, []string{engine.Subject(run, schemas.PolicyUpdated)}, engine.ReplayFrom{}, func(ev engine.Event) error {
		var p schemas.PolicyUpdatedPayload
		if err := ev.Decode(&p); err != nil {
			return err
		}
		if p.PolicyVersion == version {
			iter = p.Iteration + 1
		}
		return nil
	})
	return iter, err
}
