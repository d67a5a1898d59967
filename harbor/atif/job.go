package atif

// Harbor's job and trial records, as far as an export fills them. Field
// names and types follow Harbor 0.26.0's pydantic models (the PyPI wheel
// harbor-0.26.0-py3-none-any.whl of harbor-framework/harbor, formerly
// laude-institute/harbor): harbor/models/job/config.py (JobConfig),
// harbor/models/job/result.py (JobResult, JobStats, AgentDatasetStats),
// harbor/models/trial/config.py (TrialConfig, TaskConfig, AgentConfig),
// harbor/models/trial/result.py (TrialResult, AgentInfo, ModelInfo,
// ExceptionInfo), harbor/models/verifier/result.py (VerifierResult),
// harbor/models/task/id.py (LocalTaskId), harbor/models/agent/context.py
// (AgentContext), and the layout of harbor/models/trial/paths.py
// (TrialPaths: config.json, result.json, agent/, verifier/reward.txt).
// `harbor view` (harbor/viewer/scanner.py) takes a folder whose
// result.json has n_total_trials for a job, and a folder in it whose
// result.json has trial_name for a trial, and reads both with those
// models. testdata/harbor-models.json restates the models field by field
// for the test that checks an export against them.

import "time"

// JobConfig is a job's config.json (Harbor's JobConfig).
type JobConfig struct {
	JobName   string        `json:"job_name"`
	JobsDir   string        `json:"jobs_dir"`
	NAttempts int           `json:"n_attempts"`
	Agents    []AgentConfig `json:"agents"`
	Tasks     []TaskConfig  `json:"tasks"`
}

// AgentConfig names the agent and the model (Harbor's AgentConfig).
type AgentConfig struct {
	Name      string `json:"name"`
	ModelName string `json:"model_name,omitempty"`
}

// TaskConfig points at a task (Harbor's TaskConfig, a local one).
type TaskConfig struct {
	Path   string `json:"path"`
	Source string `json:"source,omitempty"`
}

// TrialConfig is a trial's config.json (Harbor's TrialConfig).
type TrialConfig struct {
	Task      TaskConfig  `json:"task"`
	TrialName string      `json:"trial_name"`
	TrialsDir string      `json:"trials_dir"`
	Agent     AgentConfig `json:"agent"`
	JobID     string      `json:"job_id,omitempty"`
}

// TrialResult is a trial's result.json (Harbor's TrialResult).
type TrialResult struct {
	ID             string          `json:"id"`
	TaskName       string          `json:"task_name"`
	TrialName      string          `json:"trial_name"`
	TrialURI       string          `json:"trial_uri"`
	TaskID         LocalTaskID     `json:"task_id"`
	Source         string          `json:"source,omitempty"`
	TaskChecksum   string          `json:"task_checksum"`
	Config         TrialConfig     `json:"config"`
	AgentInfo      AgentInfo       `json:"agent_info"`
	AgentResult    *AgentContext   `json:"agent_result,omitempty"`
	VerifierResult *VerifierResult `json:"verifier_result"`
	ExceptionInfo  *ExceptionInfo  `json:"exception_info"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
}

// LocalTaskID is Harbor's LocalTaskId.
type LocalTaskID struct {
	Path string `json:"path"`
}

// AgentInfo is Harbor's AgentInfo.
type AgentInfo struct {
	Name      string     `json:"name"`
	Version   string     `json:"version"`
	ModelInfo *ModelInfo `json:"model_info,omitempty"`
}

// ModelInfo is Harbor's ModelInfo.
type ModelInfo struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
}

// AgentContext is Harbor's AgentContext: the attempt's token counts.
type AgentContext struct {
	NInputTokens  int            `json:"n_input_tokens"`
	NOutputTokens int            `json:"n_output_tokens"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

// VerifierResult is Harbor's VerifierResult: named rewards.
type VerifierResult struct {
	Rewards map[string]float64 `json:"rewards"`
}

// ExceptionInfo is Harbor's ExceptionInfo.
type ExceptionInfo struct {
	ExceptionType      string    `json:"exception_type"`
	ExceptionMessage   string    `json:"exception_message"`
	ExceptionTraceback string    `json:"exception_traceback"`
	OccurredAt         time.Time `json:"occurred_at"`
}

// JobResult is a job's result.json (Harbor's JobResult).
type JobResult struct {
	ID           string        `json:"id"`
	StartedAt    time.Time     `json:"started_at"`
	UpdatedAt    time.Time     `json:"updated_at"`
	FinishedAt   time.Time     `json:"finished_at"`
	NTotalTrials int           `json:"n_total_trials"`
	Stats        JobStats      `json:"stats"`
	TrialResults []TrialResult `json:"trial_results"`
}

// JobStats is Harbor's JobStats.
type JobStats struct {
	NCompletedTrials int                           `json:"n_completed_trials"`
	NErroredTrials   int                           `json:"n_errored_trials"`
	NRunningTrials   int                           `json:"n_running_trials"`
	NPendingTrials   int                           `json:"n_pending_trials"`
	NCancelledTrials int                           `json:"n_cancelled_trials"`
	NRetries         int                           `json:"n_retries"`
	Evals            map[string]*AgentDatasetStats `json:"evals"`
	NInputTokens     int                           `json:"n_input_tokens"`
	NOutputTokens    int                           `json:"n_output_tokens"`
}

// AgentDatasetStats is Harbor's AgentDatasetStats: one agent, model and
// dataset's trials, their mean reward and which trial earned what.
type AgentDatasetStats struct {
	NTrials        int                            `json:"n_trials"`
	NErrors        int                            `json:"n_errors"`
	Metrics        []map[string]float64           `json:"metrics"`
	RewardStats    map[string]map[string][]string `json:"reward_stats"`
	ExceptionStats map[string][]string            `json:"exception_stats"`
}
