package schemas

import "github.com/t1pipe/t1/keys"

// Event types (ARCHITECTURE.md §2). Payloads below carry the same names.
const (
	RunStarted       = "run.started"
	IterationStarted = "iteration.started"
	SynthRequested   = "synth.requested"
	TaskSynthesized  = "task.synthesized"
	TaskAudited      = "task.audited"
	PoolSealed       = "pool.sealed"
	SFTRequested     = "sft.requested"
	SFTCompleted     = "sft.completed"
	RolloutRequested = "rollout.requested"
	RolloutCompleted = "rollout.completed"
	RewardScored     = "reward.scored"
	BatchReady       = "batch.ready"
	CriticUpdated    = "critic.updated"
	PolicyUpdated    = "policy.updated"
	EvalRequested    = "eval.requested"
	EvalCompleted    = "eval.completed"
	SynthCandidate   = "synth.candidate"
	SynthDiscarded   = "synth.discarded"
	RunCompleted     = "run.completed"
	RunFailed        = "run.failed"
)

// EventTypes lists every event type in pipeline order.
func EventTypes() []string {
	return []string{RunStarted, IterationStarted, SynthRequested, TaskSynthesized, TaskAudited, PoolSealed,
		SFTRequested, SFTCompleted, RolloutRequested, RolloutCompleted, RewardScored, BatchReady, CriticUpdated,
		PolicyUpdated, EvalRequested, EvalCompleted, SynthCandidate, SynthDiscarded, RunCompleted, RunFailed}
}

// FileRef is the claim check for one Parquet object.
type FileRef struct {
	Key           string `json:"key"`
	Table         string `json:"table"`
	SchemaVersion string `json:"schema_version"` // MAJOR.MINOR
	Rows          int64  `json:"rows"`
	Bytes         int64  `json:"bytes"`
	SHA256        string `json:"sha256"` // hex of the object's bytes
}

// ObjectRef is the claim check for a non-Parquet object (a task bundle,
// a snapshot, a checkpoint, a batch manifest).
type ObjectRef struct {
	Key    string `json:"key"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// ModelDims are the dimensions of the policy model that shape the token
// and routing tables.
type ModelDims struct {
	Vocab   int `json:"vocab"`
	Layers  int `json:"layers"` // MoE layers
	TopK    int `json:"top_k"`
	Experts int `json:"experts"`
}

// RunStartedPayload opens a run; control folds everything from here.
type RunStartedPayload struct {
	Seed        uint64    `json:"seed"`
	ConfigHash  string    `json:"config_hash"`
	Model       ModelDims `json:"model"`
	Iterations  int       `json:"iterations"`
	RewardScale float64   `json:"reward_scale"` // fixed for the whole run
	EvalSuites  []string  `json:"eval_suites,omitempty"`
	// Parent is set for a branch replayed from another run; Branch says
	// where it left the parent and what it changed.
	Parent string       `json:"parent,omitempty"`
	Branch *BranchPoint `json:"branch,omitempty"`
}

// BranchPoint is where a branch leaves its parent: the stage it re-ran
// over the parent's inputs and, for a continued branch, the iteration
// from which it runs as a run of its own (ARCHITECTURE.md §5, Replay).
type BranchPoint struct {
	Stage string `json:"stage"`
	// Iteration is the parent's training iteration the replayed stage
	// re-runs (sft: before the first); set when Continue is.
	Iteration int `json:"iteration"`
	// FromSeq is the stream sequence of the parent's log the replay read
	// from (0: its start).
	FromSeq uint64 `json:"from_seq,omitempty"`
	// Continue says the branch's downstream stages run after the replayed
	// one, driven by control from the branch's own events.
	Continue bool `json:"continue"`
	// PoolVersion is the parent's sealed pool the branch trains on.
	PoolVersion int `json:"pool_version,omitempty"`
	// Overrides are the frozen settings the branch changed (t1 replay
	// --set); every other one is the parent's.
	Overrides []Override `json:"overrides,omitempty"`
}

// Override is one frozen setting a branch changed: its new value and the
// parent's, as text.
type Override struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Parent string `json:"parent"`
}

// IterationStartedPayload marks the start of a training iteration.
type IterationStartedPayload struct {
	Iteration     int   `json:"iteration"`
	PolicyVersion int64 `json:"policy_version"`
	PoolVersion   int   `json:"pool_version"`
}

// SynthRequestedPayload asks synth for one round of tasks grown from seeds.
type SynthRequestedPayload struct {
	Round   int      `json:"round"`
	SeedIDs []string `json:"seed_ids"`
	// PerSeed is how many extensions to try per seed.
	PerSeed int `json:"per_seed"`
	// Seeds is how many fresh tasks round 0 starts from (SeedIDs empty).
	Seeds int `json:"seeds,omitempty"`
	// Seed is the run seed the round's random choices derive from.
	Seed uint64 `json:"seed"`
}

// StepRef is one step of a synthesised task: the step's name, its seed,
// and the index of the step whose artifact it consumes (-1 for a source).
type StepRef struct {
	Name  string `json:"name"`
	Seed  uint64 `json:"seed"`
	Input int    `json:"input"`
}

// SynthCandidatePayload is one task to build and execute, fanned out from
// synth.requested so candidates run in parallel and retry one by one.
type SynthCandidatePayload struct {
	Round    int       `json:"round"`
	ParentID string    `json:"parent_id,omitempty"`
	RootID   string    `json:"root_id,omitempty"`
	Steps    []StepRef `json:"steps"`
	// ParentSteps is how many of Steps are the parent's.
	ParentSteps int `json:"parent_steps,omitempty"`
	// Generator grows the candidate: "" or "builtin" builds Steps; "llm"
	// asks a chat model to extend the parent, and has no Steps.
	Generator string `json:"generator,omitempty"`
	// Seed is the run seed, from which (with the event id) an llm
	// candidate's request seed derives.
	Seed uint64 `json:"seed,omitempty"`
}

// SynthDiscardedPayload reports a candidate that execution rejected, so
// control can tell when a round is complete.
type SynthDiscardedPayload struct {
	TaskID   string `json:"task_id"`
	ParentID string `json:"parent_id,omitempty"`
	Round    int    `json:"round"`
	Reason   string `json:"reason"`
}

// TaskSynthesizedPayload announces a new task whose reference solution
// ran and passed.
type TaskSynthesizedPayload struct {
	TaskID     string    `json:"task_id"`
	ParentID   string    `json:"parent_id,omitempty"`
	Round      int       `json:"round"`
	Steps      int       `json:"steps"`
	Task       FileRef   `json:"task"` // tasks-table row
	Bundle     ObjectRef `json:"bundle"`
	Category   string    `json:"category,omitempty"`
	Difficulty string    `json:"difficulty,omitempty"`
}

// TaskAuditedPayload is audit's verdict on one task.
type TaskAuditedPayload struct {
	TaskID        string   `json:"task_id"`
	Round         int      `json:"round"`
	Decision      string   `json:"decision"` // accept | reject
	Total         float64  `json:"total"`
	RejectReasons []string `json:"reject_reasons,omitempty"`
	Audit         FileRef  `json:"audit"`
}

// PoolSealedPayload freezes a version of the audited training pool.
type PoolSealedPayload struct {
	PoolVersion int            `json:"pool_version"`
	Tasks       int            `json:"tasks"`
	Categories  map[string]int `json:"categories"` // histogram
	// Pool lists the tasks-table objects of the sealed pool.
	Pool []FileRef `json:"pool"`
	// Excluded counts accepted tasks dropped at sealing as near-duplicates
	// of an accepted task of a smaller id (stages.audit.max_similarity);
	// audit's own check rejects near-duplicates of the held-out suite
	// before they are accepted.
	Excluded int `json:"excluded"`
	// TaskIDs lists the pool's tasks, sorted.
	TaskIDs []string `json:"task_ids"`
}

// SFTRequestedPayload asks for supervised fine-tuning on a data set.
type SFTRequestedPayload struct {
	PolicyVersion int64     `json:"policy_version"` // the starting policy
	Data          []FileRef `json:"data"`           // tokens-table objects
	Epochs        int       `json:"epochs"`
	// Unsolved counts demonstrations left out of Data because their
	// replay through the harness did not pass the task's verifier.
	Unsolved int `json:"unsolved,omitempty"`
	// Seed, when above 0, draws the order of each pass over the
	// demonstrations (the run seed under stages.control.sft_shuffle);
	// 0 takes them in (task, attempt, chunk) order.
	Seed uint64 `json:"seed,omitempty"`
}

// SFTCompletedPayload reports the fine-tuned policy.
type SFTCompletedPayload struct {
	PolicyVersion int64     `json:"policy_version"`
	Checkpoint    ObjectRef `json:"checkpoint"`
	Loss          float64   `json:"loss"`
}

// RolloutRequestedPayload asks for one attempt at one task.
type RolloutRequestedPayload struct {
	TaskID        string `json:"task_id"`
	Attempt       int    `json:"attempt"`
	Purpose       string `json:"purpose"` // train | eval
	Suite         string `json:"suite,omitempty"`
	Iteration     int    `json:"iteration"`
	PolicyVersion int64  `json:"policy_version"`
	Seed          uint64 `json:"seed"`
	MaxTurns      int    `json:"max_turns"`
	// Bundle is the task's bundle; a branch replayed into a new run still
	// finds it. Empty means the run's own bundle of TaskID.
	Bundle ObjectRef `json:"bundle"`
}

// AttemptID is the attempt p requests, as its object keys name it.
func (p RolloutRequestedPayload) AttemptID() keys.Attempt {
	return keys.Attempt{Iteration: p.Iteration, Purpose: p.Purpose, Suite: p.Suite, PolicyVersion: p.PolicyVersion, Task: p.TaskID, Attempt: p.Attempt}
}

// DriftCounts counts TITO repairs at turn boundaries.
type DriftCounts struct {
	StrictPrefix  int `json:"strict_prefix"`
	ClippedNorm   int `json:"clipped_norm"`
	TextRetokened int `json:"text_retokened"`
	NewChunk      int `json:"new_chunk"`
}

// RolloutCompletedPayload is a finished attempt with its stored tables.
type RolloutCompletedPayload struct {
	TaskID        string      `json:"task_id"`
	Attempt       int         `json:"attempt"`
	Purpose       string      `json:"purpose"`
	Suite         string      `json:"suite,omitempty"`
	Iteration     int         `json:"iteration"`
	PolicyVersion int64       `json:"policy_version"`
	Turns         int         `json:"turns"`
	Tokens        int64       `json:"tokens"`
	Chunks        int         `json:"chunks"`
	Termination   string      `json:"termination"`
	Drift         DriftCounts `json:"drift"`
	// MalformedReplies counts the replies that earned a corrective
	// observation (the action format could not read them).
	MalformedReplies int `json:"malformed_replies,omitempty"`
	// LastVersion, under stages.rollout.episode_version latest, is the
	// policy version that sampled the attempt's last turn (PolicyVersion
	// its first); the turns and tokens rows carry each turn's.
	LastVersion int64     `json:"last_version,omitempty"`
	Trajectory  FileRef   `json:"trajectory"`
	TurnRows    FileRef   `json:"turns_ref"`
	TokenRows   FileRef   `json:"tokens_ref"`
	RoutingRows FileRef   `json:"routing_ref"`
	Snapshot    ObjectRef `json:"snapshot"`
	Bundle      ObjectRef `json:"bundle"`
	// Sandbox is the backend the attempt ran in; Isolated is false for
	// the plain backend, which isolates nothing.
	Sandbox  string `json:"sandbox"`
	Isolated bool   `json:"isolated"`
	// Network is the attempt's network policy when it had one
	// (registries; omitted for none). Egress is every request its
	// sandbox's proxy answered, in order; EgressOmitted counts those past
	// the proxy's log bound.
	Network       string          `json:"network,omitempty"`
	Egress        []EgressRequest `json:"egress,omitempty"`
	EgressOmitted int             `json:"egress_omitted,omitempty"`
}

// EgressRequest is one request an attempt's sandbox made through the
// registries proxy: where to, how, whether it went through (and if not,
// why), and the bytes carried.
type EgressRequest struct {
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Method  string `json:"method"`
	Allowed bool   `json:"allowed"`
	Reason  string `json:"reason,omitempty"`
	Bytes   int64  `json:"bytes"`
}

// RewardScoredPayload is the verifier's score of one attempt.
type RewardScoredPayload struct {
	TaskID        string  `json:"task_id"`
	Attempt       int     `json:"attempt"`
	Purpose       string  `json:"purpose"`
	Suite         string  `json:"suite,omitempty"`
	Iteration     int     `json:"iteration"`
	PolicyVersion int64   `json:"policy_version"`
	Reward        float64 `json:"reward"`
	Passed        int     `json:"passed"`
	Total         int     `json:"total"`
	Source        string  `json:"source"`
	Fallback      bool    `json:"fallback"`
	Rewards       FileRef `json:"rewards"`
}

// Solved reports whether the attempt solved its task: every assertion
// passed, or, for a verifier that reported none, its fallback reward is
// positive.
func (p RewardScoredPayload) Solved() bool {
	return (p.Total > 0 && p.Passed == p.Total) || (p.Fallback && p.Reward > 0)
}

// BatchReadyPayload hands one PPO batch to the critic.
type BatchReadyPayload struct {
	Iteration     int       `json:"iteration"`
	PolicyVersion int64     `json:"policy_version"`
	Attempts      int       `json:"attempts"`
	Tokens        int64     `json:"tokens"`
	Manifest      ObjectRef `json:"manifest"` // a BatchManifest
}

// CriticUpdatedPayload carries the critic's pre-update values to the
// actor update.
type CriticUpdatedPayload struct {
	Iteration         int       `json:"iteration"`
	PolicyVersion     int64     `json:"policy_version"`
	CriticVersion     int64     `json:"critic_version"`
	Warmup            bool      `json:"warmup"`
	WarmupSteps       int       `json:"warmup_steps,omitempty"` // optimiser steps the warm-up took
	WarmupEnd         string    `json:"warmup_end,omitempty"`   // why the warm-up stopped
	ExplainedVariance float64   `json:"explained_variance"`
	ValueLoss         float64   `json:"value_loss"`
	Values            []FileRef `json:"values"`
	Manifest          ObjectRef `json:"manifest"` // the batch, with the values added
	Checkpoint        ObjectRef `json:"checkpoint"`
}

// PolicyUpdatedPayload announces a new policy version.
type PolicyUpdatedPayload struct {
	Iteration       int       `json:"iteration"`
	PolicyVersion   int64     `json:"policy_version"` // the new version
	PreviousVersion int64     `json:"previous_version"`
	Checkpoint      ObjectRef `json:"checkpoint"`
	Metrics         FileRef   `json:"metrics"`
	ClipFraction    float64   `json:"clip_fraction"`
	PolicyLoss      float64   `json:"policy_loss"`
	LogProbGap      float64   `json:"logprob_gap"`
	// Skipped says why the update took no step (every advantage 0): the
	// new version's tensors are the previous version's.
	Skipped string `json:"skipped,omitempty"`
}

// EvalRequestedPayload asks eval to run one suite against a policy.
type EvalRequestedPayload struct {
	Suite         string `json:"suite"`
	PolicyVersion int64  `json:"policy_version"`
	// Iteration is the iteration whose rollouts the policy samples: 0 for
	// the initial and the fine-tuned policy, i+1 for the one iteration i's
	// update made. The evaluation's rows are stored under it.
	Iteration int `json:"iteration,omitempty"`
	Attempts  int `json:"attempts"` // per task, 3 by default
	Tasks     int `json:"tasks"`
}

// Breakdown is an eval summary over a subset of tasks.
type Breakdown struct {
	Attempts    int     `json:"attempts"`
	ResolveRate float64 `json:"resolve_rate"`
	MeanReward  float64 `json:"mean_reward"`
}

// EvalCompletedPayload summarises one suite against one policy.
type EvalCompletedPayload struct {
	Suite         string `json:"suite"`
	PolicyVersion int64  `json:"policy_version"`
	Tasks         int    `json:"tasks"`
	Attempts      int    `json:"attempts"`
	// Unscored are the attempts asked for whose rollout or reward failed:
	// the rates leave them out.
	Unscored     int                  `json:"unscored,omitempty"`
	ResolveRate  float64              `json:"resolve_rate"`
	MeanReward   float64              `json:"mean_reward"`
	MeanTurns    float64              `json:"mean_turns"`
	ByDifficulty map[string]Breakdown `json:"by_difficulty"`
	ByCategory   map[string]Breakdown `json:"by_category"`
	Results      []FileRef            `json:"results"`
}

// RunCompletedPayload ends a run (run.completed), or says why it stopped
// (run.failed, with Reason).
type RunCompletedPayload struct {
	Iterations    int    `json:"iterations"`
	PolicyVersion int64  `json:"policy_version"`
	PoolTasks     int    `json:"pool_tasks"`
	Reason        string `json:"reason,omitempty"`
}
