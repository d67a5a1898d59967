package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/schemas/routing"
)

// Rows are the table rows of one attempt.
type Rows struct {
	Tokens     []schemas.TokenRow
	Routing    []schemas.RoutingRow
	Turns      []schemas.TurnRow
	Trajectory schemas.TrajectoryRow
}

// AttemptRows turns a finished episode into its table rows. experts is the
// model's expert count (for the routing codec).
func AttemptRows(run string, p schemas.RolloutRequestedPayload, res *Result, experts int, snapshotKey string, took time.Duration) (*Rows, error) {
	rows := &Rows{}
	att := int32(p.Attempt)
	for i, ch := range res.Chunks {
		row := schemas.TokenRow{
			Run: run, TaskID: p.TaskID, Attempt: att, Chunk: int32(i), Iteration: int32(p.Iteration), PolicyVersion: p.PolicyVersion,
			TokenIDs: ints32(ch.IDs), LogProbs: ch.LogProbs, LossMask: ch.Loss, TurnOffsets: ints32(ch.Turns),
			DriftRepair:  ch.Opened,
			StrictPrefix: int32(ch.Repairs[schemas.RepairStrictPrefix]), ClippedNorm: int32(ch.Repairs[schemas.RepairClippedNorm]),
			TextRetokened: int32(ch.Repairs[schemas.RepairTextRetokened]),
			Temperature:   float32(res.Sampling.Temperature), TopP: float32(res.Sampling.TopP),
		}
		if row.DriftRepair == "" {
			row.DriftRepair = schemas.RepairNone
		}
		rows.Tokens = append(rows.Tokens, row)
		r := res.Routing[i]
		if r == nil {
			continue
		}
		rec, err := record(r, experts, len(ch.IDs))
		if err != nil {
			return nil, fmt.Errorf("chunk %d routing: %w", i, err)
		}
		rr, err := schemas.NewRoutingRow(run, p.TaskID, p.Attempt, i, rec, routing.Packed)
		if err != nil {
			return nil, err
		}
		rr.PolicyVersion, rr.Iteration = p.PolicyVersion, int32(p.Iteration)
		rows.Routing = append(rows.Routing, rr)
	}
	var at time.Duration
	for _, t := range res.Turns {
		exit := int32(0)
		for _, e := range t.ExitCodes {
			exit = int32(e)
		}
		rows.Turns = append(rows.Turns, schemas.TurnRow{
			// Text columns hold UTF-8; the exact bytes the policy saw are
			// the token ids.
			Run: run, TaskID: p.TaskID, Attempt: att, Turn: int32(t.Index), Chunk: int32(t.Chunk),
			Action: strings.ToValidUTF8(t.Reply, "\uFFFD"), Observation: strings.ToValidUTF8(t.Observation, "\uFFFD"),
			ExitCode: exit, CompletionTokens: int32(t.Sampled),
			StartMS: at.Milliseconds(), DurationMS: t.Duration.Milliseconds(),
			Purpose: p.Purpose, PolicyVersion: p.PolicyVersion, Iteration: int32(p.Iteration),
		})
		at += t.Duration
	}
	rows.Trajectory = schemas.TrajectoryRow{
		Run: run, TaskID: p.TaskID, Attempt: att, Iteration: int32(p.Iteration), Purpose: p.Purpose, Suite: p.Suite,
		PolicyVersion: p.PolicyVersion, Seed: p.Seed, Turns: int32(len(res.Turns)), Tokens: int64(res.Sampled),
		Chunks: int32(len(res.Chunks)), Compactions: int32(res.Repairs["compaction"]), Termination: res.Termination,
		SnapshotKey: snapshotKey, DurationMS: took.Milliseconds(),
	}
	return rows, nil
}

// TurnVersions sets the policy version of every turn's row and of every
// chunk's tokens and routing rows from versions, one per turn, for an
// episode that moved to newer versions as it went (EpisodeLatest). Every
// turn of a chunk must share its version, as a move opens a chunk of its
// own.
func (r *Rows) TurnVersions(versions []int64) error {
	if len(versions) != len(r.Turns) {
		return fmt.Errorf("%d turn versions for %d turns", len(versions), len(r.Turns))
	}
	chunk := map[int32]int64{}
	for i, v := range versions {
		t := &r.Turns[i]
		t.PolicyVersion = v
		if w, ok := chunk[t.Chunk]; ok && w != v {
			return fmt.Errorf("chunk %d holds turns of policy versions %d and %d", t.Chunk, w, v)
		}
		chunk[t.Chunk] = v
	}
	for i := range r.Tokens {
		if v, ok := chunk[r.Tokens[i].Chunk]; ok {
			r.Tokens[i].PolicyVersion = v
		}
	}
	for i := range r.Routing {
		if v, ok := chunk[r.Routing[i].Chunk]; ok {
			r.Routing[i].PolicyVersion = v
		}
	}
	return nil
}

func ints32(xs []int) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}

// record converts the sampler's routing into the codec's record of a
// chunk of tokens ids. The sampler never forwards a chunk's last token
// (SGLang returns [tokens−1, layers, top_k]); its row repeats the token
// before it. It changes no loss: the last position predicts nothing and
// no later position attends to it.
func record(r *moe.Routing, experts, tokens int) (*routing.Record, error) {
	if r.Tokens != tokens-1 || r.Tokens < 1 {
		return nil, fmt.Errorf("routing covers %d tokens of a %d-token chunk, want %d", r.Tokens, tokens, tokens-1)
	}
	rec, err := routing.NewRecord(tokens, r.Layers, r.TopK, experts)
	if err != nil {
		return nil, err
	}
	ids := make([]int, r.TopK)
	for t := range tokens {
		src := min(t, r.Tokens-1)
		for l := range r.Layers {
			for j, e := range r.At(src, l) {
				ids[j] = int(e)
			}
			if err := rec.Set(t, l, ids); err != nil {
				return nil, err
			}
		}
	}
	return rec, nil
}
