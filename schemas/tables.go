package schemas

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a table schema version. A reader accepts any minor version of
// a major it knows (minors only add columns); a new major is a breaking
// change and is refused.
type Version struct {
	Major, Minor int
}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// ParseVersion parses "MAJOR.MINOR".
func ParseVersion(s string) (Version, error) {
	a, b, ok := strings.Cut(s, ".")
	maj, err1 := strconv.Atoi(a)
	mnr, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || maj < 0 || mnr < 0 {
		return Version{}, fmt.Errorf("schema version %q: want MAJOR.MINOR", s)
	}
	return Version{maj, mnr}, nil
}

// Table describes one Parquet table of the pipeline.
type Table struct {
	// Name is the table's directory under runs/<run>/.
	Name    string
	Version Version
	// Partition is the data column whose value places a row: every object
	// of the table lives under <Dir>-NNNN/ (keys.TableObject) and every
	// row of it holds NNNN in this column. The directory is not named
	// <column>=NNNN on purpose: hive-partitioned readers (DuckDB, pyarrow,
	// polars) would add or replace a column from it, each with a type of
	// its own, so every tool reads the file's columns and types alone.
	Partition string
	// Dir names the table's partition directories.
	Dir string
	// Grain is what one row stands for.
	Grain string
}

// Metadata keys every Parquet file of the pipeline carries.
const (
	MetaTable   = "t1.table"
	MetaVersion = "t1.schema_version"
)

// The tables. Rows of each type name their table through Table().
var (
	TasksTable        = Table{Name: "tasks", Version: Version{1, 0}, Partition: "round", Dir: "round", Grain: "task"}
	AuditsTable       = Table{Name: "audits", Version: Version{1, 0}, Partition: "round", Dir: "round", Grain: "task"}
	TrajectoriesTable = Table{Name: "trajectories", Version: Version{1, 1}, Partition: "iteration", Dir: "iter", Grain: "attempt"}
	TurnsTable        = Table{Name: "turns", Version: Version{1, 2}, Partition: "iteration", Dir: "iter", Grain: "turn"}
	TokensTable       = Table{Name: "tokens", Version: Version{1, 1}, Partition: "iteration", Dir: "iter", Grain: "chunk"}
	RoutingTable      = Table{Name: "routing", Version: Version{1, 2}, Partition: "iteration", Dir: "iter", Grain: "chunk"}
	RewardsTable      = Table{Name: "rewards", Version: Version{1, 0}, Partition: "iteration", Dir: "iter", Grain: "attempt"}
	ValuesTable       = Table{Name: "values", Version: Version{1, 0}, Partition: "iteration", Dir: "iter", Grain: "chunk"}
	MetricsTable      = Table{Name: "metrics", Version: Version{1, 2}, Partition: "iteration", Dir: "iter", Grain: "iteration"}
	EvalResultsTable  = Table{Name: "eval_results", Version: Version{1, 1}, Partition: "iteration", Dir: "iter", Grain: "attempt"}
)

// Tables lists every table.
func Tables() []Table {
	return []Table{TasksTable, AuditsTable, TrajectoriesTable, TurnsTable, TokensTable, RoutingTable,
		RewardsTable, ValuesTable, MetricsTable, EvalResultsTable}
}

// LookupTable finds a table by name.
func LookupTable(name string) (Table, error) {
	var names []string
	for _, t := range Tables() {
		if t.Name == name {
			return t, nil
		}
		names = append(names, t.Name)
	}
	return Table{}, fmt.Errorf("unknown table %q (tables: %s)", name, strings.Join(names, ", "))
}

// Row is implemented by every table's row type.
type Row interface {
	Table() Table
}

// Purposes of a rollout.
const (
	PurposeTrain = "train"
	PurposeEval  = "eval"
)

// Drift-repair kinds of TITO (ARCHITECTURE.md §1.3), recorded on the chunk a
// repair produced.
const (
	RepairNone          = "none"           // first chunk of an attempt
	RepairStrictPrefix  = "strict_prefix"  // re-rendered context extended the held tokens
	RepairClippedNorm   = "clipped_norm"   // boundary/template tokens clipped and normalised
	RepairTextRetokened = "text_retokened" // non-loss text re-tokenised
	RepairNewChunk      = "new_chunk"      // anything else: a new training sequence
)

// TaskRow is one synthesized or imported task. The Harbor bundle itself
// is an object (BundleKey, at keys.Bundle) because it is a directory
// tree, not a row.
type TaskRow struct {
	Run         string   `parquet:"run,dict"`
	TaskID      string   `parquet:"task_id"`
	ParentID    string   `parquet:"parent_id"` // empty for seeds
	RootID      string   `parquet:"root_id"`   // seed at the root of the lineage
	Round       int32    `parquet:"round"`
	Source      string   `parquet:"source,dict"` // seed | synth | import
	Category    string   `parquet:"category,dict"`
	Difficulty  string   `parquet:"difficulty,dict"`
	Tags        []string `parquet:"tags,list"`
	Instruction string   `parquet:"instruction"`
	Steps       int32    `parquet:"steps"` // executable steps of the reference solution
	BundleKey   string   `parquet:"bundle_key"`
	BundleSHA   string   `parquet:"bundle_sha256"`
	// SolutionPassed records that the reference solution was executed and
	// passed the verifier before the task was kept.
	SolutionPassed bool `parquet:"solution_passed"`
}

// Table implements Row.
func (TaskRow) Table() Table { return TasksTable }

// DimensionScore is one of the audit's eight dimensions.
type DimensionScore struct {
	Name  string  `parquet:"name"`
	Facet string  `parquet:"facet"` // verifier | solution | instruction | value
	Score float64 `parquet:"score"` // 0..1
}

// AuditRow is the audit of one task.
type AuditRow struct {
	Run        string           `parquet:"run,dict"`
	TaskID     string           `parquet:"task_id"`
	Round      int32            `parquet:"round"`
	Dimensions []DimensionScore `parquet:"dimensions,list"`
	// Facet scores, 0..1, weighted 45/25/20/10 into Total.
	Verifier      float64  `parquet:"verifier"`
	Solution      float64  `parquet:"solution"`
	Instruction   float64  `parquet:"instruction"`
	Value         float64  `parquet:"value"`
	Total         float64  `parquet:"total"`
	RejectReasons []string `parquet:"reject_reasons,list"` // hidden_requirement, test_leakage, solution_gaming, weak_verifier, near_duplicate, low_score
	Decision      string   `parquet:"decision,dict"`       // accept | reject
	NearDupOf     string   `parquet:"near_duplicate_of"`
}

// Table implements Row.
func (AuditRow) Table() Table { return AuditsTable }

// TrajectoryRow is one attempt at a task.
type TrajectoryRow struct {
	Run           string `parquet:"run,dict"`
	TaskID        string `parquet:"task_id"`
	Attempt       int32  `parquet:"attempt"`
	Iteration     int32  `parquet:"iteration"`
	Purpose       string `parquet:"purpose,dict"` // train | eval
	Suite         string `parquet:"suite,dict"`   // eval suite; empty for training
	PolicyVersion int64  `parquet:"policy_version"`
	Seed          uint64 `parquet:"seed"`
	Turns         int32  `parquet:"turns"`
	Tokens        int64  `parquet:"tokens"`
	Chunks        int32  `parquet:"chunks"`
	Compactions   int32  `parquet:"compactions"`
	Termination   string `parquet:"termination,dict"` // done | max_turns | context | timeout | error
	SnapshotKey   string `parquet:"snapshot_key"`
	DurationMS    int64  `parquet:"duration_ms"`
	// Sandbox is the backend the attempt ran in; Isolated is false for the
	// plain backend, which isolates nothing (schema 1.1).
	Sandbox  string `parquet:"sandbox,dict"`
	Isolated bool   `parquet:"isolated"`
}

// Table implements Row.
func (TrajectoryRow) Table() Table { return TrajectoriesTable }

// TurnRow is one agent action and its observation.
type TurnRow struct {
	Run     string `parquet:"run,dict"`
	TaskID  string `parquet:"task_id"`
	Attempt int32  `parquet:"attempt"`
	Turn    int32  `parquet:"turn"`
	Chunk   int32  `parquet:"chunk"`
	Action  string `parquet:"action"`
	// Observation is bounded by the harness; Truncated says it was cut
	// and ObservationBytes is the full size.
	Observation      string `parquet:"observation"`
	Truncated        bool   `parquet:"truncated"`
	ObservationBytes int64  `parquet:"observation_bytes"`
	ExitCode         int32  `parquet:"exit_code"`
	PromptTokens     int32  `parquet:"prompt_tokens"`
	CompletionTokens int32  `parquet:"completion_tokens"`
	Compacted        bool   `parquet:"compacted"` // context compaction ran before this turn
	StartMS          int64  `parquet:"start_ms"`  // since the attempt started
	DurationMS       int64  `parquet:"duration_ms"`
	// Purpose and PolicyVersion tell apart the turns of one task's
	// attempts under several policies in one iteration, such as the
	// evaluations of the base and the fine-tuned policy (schema 1.1).
	Purpose       string `parquet:"purpose,dict"`
	PolicyVersion int64  `parquet:"policy_version"`
	// Iteration is the partition the row is stored under (schema 1.2).
	Iteration int32 `parquet:"iteration"`
}

// Table implements Row.
func (TurnRow) Table() Table { return TurnsTable }

// TokenRow is one training sequence (chunk) of an attempt, exactly as the
// sampler produced it (TITO). The lists have one entry per token;
// TurnOffsets has one entry per turn that starts in the chunk.
type TokenRow struct {
	Run           string    `parquet:"run,dict"`
	TaskID        string    `parquet:"task_id"`
	Attempt       int32     `parquet:"attempt"`
	Chunk         int32     `parquet:"chunk"`
	Iteration     int32     `parquet:"iteration"`
	PolicyVersion int64     `parquet:"policy_version"`
	TokenIDs      []int32   `parquet:"token_ids,list"`
	LogProbs      []float32 `parquet:"logprobs,list"` // sampler log-probs; 0 outside the loss region
	LossMask      []bool    `parquet:"loss_mask,list"`
	TurnOffsets   []int32   `parquet:"turn_offsets,list"`
	DriftRepair   string    `parquet:"drift_repair,dict"` // how this chunk began (Repair*)
	// Repair counts at turn boundaries inside this chunk.
	StrictPrefix  int32 `parquet:"repairs_strict_prefix"`
	ClippedNorm   int32 `parquet:"repairs_clipped_norm"`
	TextRetokened int32 `parquet:"repairs_text_retokened"`
	// Temperature and TopP are the sampling settings the log-probs are
	// relative to (schema 1.1): a trainer divides the logits by the
	// temperature before its log-softmax, or its log-probs are of another
	// distribution. 0 (greedy, or a 1.0 file) means untempered.
	Temperature float32 `parquet:"temperature"`
	TopP        float32 `parquet:"top_p"`
}

// Table implements Row.
func (TokenRow) Table() Table { return TokensTable }

// RoutingRow holds the experts selected for every token and MoE layer of
// one chunk (R³), as one record of the schemas/routing codec.
type RoutingRow struct {
	Run     string `parquet:"run,dict"`
	TaskID  string `parquet:"task_id"`
	Attempt int32  `parquet:"attempt"`
	Chunk   int32  `parquet:"chunk"`
	Tokens  int32  `parquet:"tokens"`
	Layers  int32  `parquet:"layers"`
	TopK    int32  `parquet:"top_k"`
	Experts int32  `parquet:"experts"` // the model's expert count
	// Encoding is the codec's encoding name (packed, packed+zstd, rank,
	// delta). For "packed", Record[IDsOffset:] starts the raw
	// little-endian [T, L, k] buffer.
	Encoding  string `parquet:"encoding,dict"`
	IDsOffset int32  `parquet:"ids_offset"`
	Record    []byte `parquet:"record"`
	// PolicyVersion is the sampling policy's, as in the tokens row the
	// chunk aligns with: evaluations of several policies share an
	// iteration's partition (schema 1.1).
	PolicyVersion int64 `parquet:"policy_version"`
	// Iteration is the partition the row is stored under (schema 1.2).
	Iteration int32 `parquet:"iteration"`
}

// Table implements Row.
func (RoutingRow) Table() Table { return RoutingTable }

// Assertion is one verifier check.
type Assertion struct {
	Name   string `parquet:"name"`
	Passed bool   `parquet:"passed"`
}

// RewardRow is the score of one attempt.
type RewardRow struct {
	Run           string      `parquet:"run,dict"`
	TaskID        string      `parquet:"task_id"`
	Attempt       int32       `parquet:"attempt"`
	Iteration     int32       `parquet:"iteration"`
	Purpose       string      `parquet:"purpose,dict"`
	PolicyVersion int64       `parquet:"policy_version"`
	Assertions    []Assertion `parquet:"assertions,list"`
	Passed        int32       `parquet:"passed"`
	Total         int32       `parquet:"total"`
	Scale         float64     `parquet:"scale"`  // fixed before the run
	Reward        float64     `parquet:"reward"` // Passed × Scale, or the binary fallback
	Source        string      `parquet:"source,dict"`
	Fallback      bool        `parquet:"fallback"` // no per-assertion report: binary outcome used
	ExitCode      int32       `parquet:"verifier_exit_code"`
}

// Table implements Row.
func (RewardRow) Table() Table { return RewardsTable }

// ValueRow is the critic's pre-update view of one chunk: the input of
// the PPO update. Lists have one entry per token of the chunk.
type ValueRow struct {
	Run           string    `parquet:"run,dict"`
	TaskID        string    `parquet:"task_id"`
	Attempt       int32     `parquet:"attempt"`
	Chunk         int32     `parquet:"chunk"`
	Iteration     int32     `parquet:"iteration"`
	PolicyVersion int64     `parquet:"policy_version"`
	CriticVersion int64     `parquet:"critic_version"`
	Values        []float32 `parquet:"values,list"`
	Advantages    []float32 `parquet:"advantages,list"`
	Returns       []float32 `parquet:"returns,list"`
}

// Table implements Row.
func (ValueRow) Table() Table { return ValuesTable }

// MetricRow is the summary of one training iteration.
type MetricRow struct {
	Run               string  `parquet:"run,dict"`
	Iteration         int32   `parquet:"iteration"`
	PolicyVersion     int64   `parquet:"policy_version"`
	Trajectories      int32   `parquet:"trajectories"`
	Tokens            int64   `parquet:"tokens"`
	RewardMean        float64 `parquet:"reward_mean"`
	ResolveRate       float64 `parquet:"resolve_rate"`
	ExplainedVariance float64 `parquet:"explained_variance"`
	LogProbGap        float64 `parquet:"logprob_gap"` // masked, weighted train-vs-inference gap
	ClipFraction      float64 `parquet:"clip_fraction"`
	PolicyLoss        float64 `parquet:"policy_loss"`
	ValueLoss         float64 `parquet:"value_loss"`
	StrictPrefix      int64   `parquet:"repairs_strict_prefix"`
	ClippedNorm       int64   `parquet:"repairs_clipped_norm"`
	TextRetokened     int64   `parquet:"repairs_text_retokened"`
	NewChunk          int64   `parquet:"repairs_new_chunk"`
	RoutingFlips      float64 `parquet:"routing_flip_rate"` // fraction of replayed sets the live router would change
	// Schema 1.1: the rest of the trainer's account of the update, so a
	// run's health is one table scan rather than a JSON object per update.
	ApproxKL          float64 `parquet:"approx_kl"`       // updated vs pre-update policy, over every action
	GradNorm          float64 `parquet:"grad_norm"`       // mean global gradient norm before clipping
	LogProbGapMax     float64 `parquet:"logprob_gap_max"` // largest per-token train-vs-inference gap
	RoutingMismatches int64   `parquet:"routing_mismatches"`
	RoutingSets       int64   `parquet:"routing_sets"`
	LossDrift         int64   `parquet:"loss_drift"` // loss tokens that differ from the sampler's; 0 or a bug
	Replay            bool    `parquet:"replay"`     // routing replay (R³) in the update
	Actions           int64   `parquet:"actions"`    // loss tokens trained on
	CriticWarmupSteps int32   `parquet:"critic_warmup_steps"`
	// Schema 1.2: the update's change of the policy as it will be sampled,
	// each version routing on its own (trainer.ActorMetrics).
	LiveKL          float64 `parquet:"live_kl"`
	ExpertsSwitched float64 `parquet:"experts_switched"`
}

// Table implements Row.
func (MetricRow) Table() Table { return MetricsTable }

// EvalResultRow is one evaluation attempt.
type EvalResultRow struct {
	Run           string  `parquet:"run,dict"`
	Suite         string  `parquet:"suite,dict"`
	TaskID        string  `parquet:"task_id"`
	Attempt       int32   `parquet:"attempt"`
	PolicyVersion int64   `parquet:"policy_version"`
	Reward        float64 `parquet:"reward"`
	Passed        int32   `parquet:"passed"`
	Total         int32   `parquet:"total"`
	Solved        bool    `parquet:"solved"`
	Turns         int32   `parquet:"turns"`
	Difficulty    string  `parquet:"difficulty,dict"`
	Category      string  `parquet:"category,dict"`
	// Iteration is the iteration whose rollouts the evaluated policy
	// samples (0 for the initial and the fine-tuned policy; the last
	// policy's is the number of iterations), the partition the row is
	// stored under (schema 1.1). PolicyVersion tells apart two policies
	// of one iteration.
	Iteration int32 `parquet:"iteration"`
}

// Table implements Row.
func (EvalResultRow) Table() Table { return EvalResultsTable }
