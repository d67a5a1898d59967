package atif

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trial"
)

// Written is what WriteRun wrote: each Harbor job's folder name, and the
// trials in them.
type Written struct {
	Dir    string   `json:"dir"`
	Jobs   []string `json:"jobs"`
	Trials int      `json:"trials"`
}

// WriteText says what was written where, and how to look at it.
func (w Written) WriteText(out io.Writer) {
	fmt.Fprintf(out, "wrote %d trials in %d Harbor jobs to %s (harbor view %s)\n", w.Trials, len(w.Jobs), w.Dir, w.Dir)
}

// WriteRun writes every attempt of run (of purpose, when not empty) into
// dir in Harbor's job and trial layout, one job per purpose, suite and
// policy version, so that `harbor view dir` lists them:
//
//	dir/<run>-<purpose>[-<suite>]-v<policy>/     a job
//	├── config.json                            JobConfig
//	├── result.json                            JobResult: trials, errors, mean reward, who earned what
//	└── <task>__a<attempt>-i<iteration>/       a trial
//	    ├── config.json                        TrialConfig
//	    ├── result.json                        TrialResult: verifier_result.rewards (reward, resolved, passed, total)
//	    ├── agent/trajectory.json              the attempt in ATIF (FromRows)
//	    └── verifier/reward.txt                the reward
//
// It follows each rollout.completed event to its trajectory, turns and
// tokens objects and its task's bundle, and takes the verdict from the
// attempt's reward.scored; an attempt without one is a trial with an
// exception and no verifier result. Replies are read with format and the
// episode's prompt is systemPrompt, as the run's harness had them.
func WriteRun(ctx context.Context, l *engine.Log, st store.ObjectStore, run, purpose string, format agent.Format, systemPrompt, dir string) (Written, error) {
	w := Written{Dir: dir}
	rewards := map[attemptKey]schemas.RewardScoredPayload{}
	err := l.Replay(ctx, []string{engine.Subject(run, schemas.RewardScored)}, engine.ReplayFrom{}, func(ev engine.Event) error {
		var p schemas.RewardScoredPayload
		if err := ev.Decode(&p); err != nil {
			return err
		}
		rewards[attemptKey{p.TaskID, p.Attempt, p.Iteration, p.Purpose, p.PolicyVersion}] = p
		return nil
	})
	if err != nil {
		return w, err
	}
	tasks := map[string]*harbor.Task{}
	jobs := map[string]*job{}
	var order []string
	err = l.Replay(ctx, []string{engine.Subject(run, schemas.RolloutCompleted)}, engine.ReplayFrom{}, func(ev engine.Event) error {
		var p schemas.RolloutCompletedPayload
		if err := ev.Decode(&p); err != nil {
			return err
		}
		if purpose != "" && p.Purpose != purpose {
			return nil
		}
		traj, err := schemas.ReadRows[schemas.TrajectoryRow](ctx, st, p.Trajectory.Key, &p.Trajectory)
		if err != nil {
			return err
		}
		if len(traj) != 1 {
			return fmt.Errorf("%s: %d trajectory rows, want 1", p.Trajectory.Key, len(traj))
		}
		turns, err := schemas.ReadRows[schemas.TurnRow](ctx, st, p.TurnRows.Key, &p.TurnRows)
		if err != nil {
			return err
		}
		tokens, err := schemas.ReadRows[schemas.TokenRow](ctx, st, p.TokenRows.Key, &p.TokenRows)
		if err != nil {
			return err
		}
		task, ok := tasks[p.TaskID]
		if !ok {
			tmp, err := os.MkdirTemp("", "t1-export-")
			if err != nil {
				return err
			}
			task, err = trial.FetchBundle(ctx, st, keys.Bundle(run, p.TaskID), "", filepath.Join(tmp, "task"))
			os.RemoveAll(tmp)
			if err != nil {
				return err
			}
			tasks[p.TaskID] = task
		}
		a, err := FromRows(traj[0], format, systemPrompt, task.Instruction, turns, tokens)
		if err != nil {
			return err
		}
		name := jobName(run, p)
		j := jobs[name]
		if j == nil {
			j = newJob(run, name, dir, p)
			jobs[name] = j
			order = append(order, name)
		}
		sum, err := task.Hash()
		if err != nil {
			return err
		}
		r, scored := rewards[attemptKey{p.TaskID, p.Attempt, p.Iteration, p.Purpose, p.PolicyVersion}]
		if err := j.writeTrial(run, p, ev.Time.UTC(), sum, a, r, scored); err != nil {
			return err
		}
		w.Trials++
		return nil
	})
	if err != nil {
		return w, err
	}
	for _, name := range order {
		if err := jobs[name].finish(); err != nil {
			return w, err
		}
		w.Jobs = append(w.Jobs, name)
	}
	return w, nil
}

type attemptKey struct {
	task      string
	attempt   int
	iteration int
	purpose   string
	version   int64
}

// job gathers one Harbor job's trials as they are written.
type job struct {
	name, dir, source string
	config            JobConfig
	result            JobResult
	stats             *AgentDatasetStats
	attempts          map[string]bool // task ids, for n_attempts
	rewardSum         float64
}

// Agent and model as the trials name them: t1's harness, and the policy
// version as the model.
const (
	agentName    = "t1-terminus"
	agentVersion = "1"
)

func modelName(v int64) string { return fmt.Sprintf("policy-v%d", v) }

// jobName is one folder per purpose, suite and policy version: Harbor
// aggregates a job's trials, so a job never mixes policies.
func jobName(run string, p schemas.RolloutCompletedPayload) string {
	parts := []string{run, p.Purpose}
	if p.Suite != "" {
		parts = append(parts, p.Suite)
	}
	parts = append(parts, fmt.Sprintf("v%d", p.PolicyVersion))
	return safeName(strings.Join(parts, "-"))
}

// safeName keeps a folder name to one path element whatever a suite is
// called (a suite may be a directory path).
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-.")
}

func newJob(run, name, dir string, p schemas.RolloutCompletedPayload) *job {
	source := p.Suite
	if source == "" {
		source = p.Purpose
	}
	model := modelName(p.PolicyVersion)
	j := &job{name: name, dir: filepath.Join(dir, name), source: source, attempts: map[string]bool{},
		stats: &AgentDatasetStats{Metrics: []map[string]float64{}, RewardStats: map[string]map[string][]string{}, ExceptionStats: map[string][]string{}}}
	j.config = JobConfig{JobName: name, JobsDir: dir, Agents: []AgentConfig{{Name: agentName, ModelName: model}}, Tasks: []TaskConfig{}}
	j.result = JobResult{ID: uuidOf(run + "/" + name), TrialResults: []TrialResult{},
		Stats: JobStats{Evals: map[string]*AgentDatasetStats{agentName + "__" + model + "__" + source: j.stats}}}
	return j
}

// writeTrial writes one attempt's trial folder and counts it in the job.
func (j *job) writeTrial(run string, p schemas.RolloutCompletedPayload, at time.Time, checksum string, a *Trajectory,
	r schemas.RewardScoredPayload, scored bool) error {
	trialName := safeName(fmt.Sprintf("%s__a%d-i%d", p.TaskID, p.Attempt, p.Iteration))
	tdir := filepath.Join(j.dir, trialName)
	task := TaskConfig{Path: keys.Bundle(run, p.TaskID), Source: j.source}
	if !j.attempts[p.TaskID] {
		j.config.Tasks = append(j.config.Tasks, TaskConfig{Path: task.Path})
	}
	j.attempts[p.TaskID] = true
	agentCfg := AgentConfig{Name: agentName, ModelName: modelName(p.PolicyVersion)}
	cfg := TrialConfig{Task: task, TrialName: trialName, TrialsDir: j.dir, Agent: agentCfg, JobID: j.result.ID}
	res := TrialResult{
		ID: uuidOf(run + "/" + j.name + "/" + trialName), TaskName: p.TaskID, TrialName: trialName,
		TrialURI: (&url.URL{Scheme: "file", Path: filepath.ToSlash(tdir)}).String(), TaskID: LocalTaskID{Path: task.Path},
		Source: j.source, TaskChecksum: checksum, Config: cfg,
		AgentInfo: AgentInfo{Name: agentName, Version: agentVersion, ModelInfo: &ModelInfo{Name: agentCfg.ModelName, Provider: "t1"}},
		AgentResult: &AgentContext{NInputTokens: a.FinalMetrics.TotalPromptTokens, NOutputTokens: a.FinalMetrics.TotalCompletionTokens,
			Metadata: map[string]any{"purpose": p.Purpose, "iteration": p.Iteration, "attempt": p.Attempt, "policy_version": p.PolicyVersion,
				"turns": p.Turns, "termination": p.Termination}},
		FinishedAt: &at,
	}
	if scored {
		resolved := 0.0
		if r.Solved() {
			resolved = 1
		}
		res.VerifierResult = &VerifierResult{Rewards: map[string]float64{"reward": r.Reward, "resolved": resolved,
			"passed": float64(r.Passed), "total": float64(r.Total)}}
	} else {
		res.ExceptionInfo = &ExceptionInfo{ExceptionType: "RewardMissing", OccurredAt: at,
			ExceptionMessage: "the run has no reward.scored event for this attempt: its reward failed or has not been scored"}
	}
	if err := writeJSON(filepath.Join(tdir, "agent", "trajectory.json"), a); err != nil {
		return err
	}
	if scored {
		if err := writeFile(filepath.Join(tdir, "verifier", "reward.txt"), []byte(strconv.FormatFloat(r.Reward, 'g', -1, 64)+"\n")); err != nil {
			return err
		}
	}
	if err := writeJSON(filepath.Join(tdir, "config.json"), cfg); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(tdir, "result.json"), res); err != nil {
		return err
	}
	j.count(res, at)
	return nil
}

// count adds a trial to the job's result as Harbor's JobStats.increment
// does.
func (j *job) count(res TrialResult, at time.Time) {
	jr := &j.result
	if jr.StartedAt.IsZero() || at.Before(jr.StartedAt) {
		jr.StartedAt = at
	}
	if at.After(jr.FinishedAt) {
		jr.FinishedAt, jr.UpdatedAt = at, at
	}
	jr.NTotalTrials++
	jr.Stats.NCompletedTrials++
	jr.Stats.NInputTokens += res.AgentResult.NInputTokens
	jr.Stats.NOutputTokens += res.AgentResult.NOutputTokens
	if v := res.VerifierResult; v != nil {
		j.stats.NTrials++
		j.rewardSum += v.Rewards["reward"]
		for k, x := range v.Rewards {
			if j.stats.RewardStats[k] == nil {
				j.stats.RewardStats[k] = map[string][]string{}
			}
			key := strconv.FormatFloat(x, 'g', -1, 64)
			j.stats.RewardStats[k][key] = append(j.stats.RewardStats[k][key], res.TrialName)
		}
	}
	if e := res.ExceptionInfo; e != nil {
		j.stats.NErrors++
		jr.Stats.NErroredTrials++
		j.stats.ExceptionStats[e.ExceptionType] = append(j.stats.ExceptionStats[e.ExceptionType], res.TrialName)
	}
}

// finish writes the job's config.json and result.json. The job's start is
// its first trial's end: an attempt's start is not recorded.
func (j *job) finish() error {
	j.config.NAttempts = max(1, j.result.NTotalTrials/max(1, len(j.attempts)))
	if j.stats.NTrials > 0 {
		// Harbor's default metric: the mean of the trials' rewards.
		j.stats.Metrics = []map[string]float64{{"mean": j.rewardSum / float64(j.stats.NTrials)}}
	}
	if err := writeJSON(filepath.Join(j.dir, "config.json"), j.config); err != nil {
		return err
	}
	return writeJSON(filepath.Join(j.dir, "result.json"), j.result)
}

// uuidOf is a UUID (version 8, RFC 9562) derived from s, so that
// exporting a run again writes the same ids.
func uuidOf(s string) string {
	h := sha256.Sum256([]byte(s))
	h[6] = h[6]&0x0f | 0x80
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(path, append(data, '\n'))
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
