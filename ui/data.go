package ui

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/t1pipe/t1/query"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

// attemptRef names one attempt: what tells it apart from every other of
// its run (evaluations of several policies share an iteration).
type attemptRef struct {
	Iteration int
	Purpose   string
	Version   int64
	Task      string
	Attempt   int
}

// Query is the attempt as URL parameters.
func (a attemptRef) Query() template.URL {
	return template.URL(fmt.Sprintf("it=%d&purpose=%s&v=%d&task=%s&n=%d", a.Iteration, url.QueryEscape(a.Purpose), a.Version, url.QueryEscape(a.Task), a.Attempt))
}

func (a attemptRef) String() string {
	return fmt.Sprintf("%s #%d (iteration %d, %s, policy v%d)", a.Task, a.Attempt, a.Iteration, a.Purpose, a.Version)
}

// parseAttempt reads an attemptRef from URL parameters.
func parseAttempt(get func(string) string) (attemptRef, error) {
	var a attemptRef
	var err error
	ints := []struct {
		name string
		dst  *int
	}{{"it", &a.Iteration}, {"n", &a.Attempt}}
	for _, p := range ints {
		if *p.dst, err = strconv.Atoi(get(p.name)); err != nil {
			return a, fmt.Errorf("ui: parameter %s=%q is not a number", p.name, get(p.name))
		}
	}
	if a.Version, err = strconv.ParseInt(get("v"), 10, 64); err != nil {
		return a, fmt.Errorf("ui: parameter v=%q is not a policy version", get("v"))
	}
	if a.Task, a.Purpose = get("task"), get("purpose"); a.Task == "" || a.Purpose == "" {
		return a, fmt.Errorf("ui: an attempt needs task and purpose parameters")
	}
	return a, nil
}

// where is the filter of the attempt's rows in a table that has a
// purpose column or not (tokens, routing and values have none).
func (a attemptRef) where(purpose bool) query.Expr {
	s := fmt.Sprintf("task_id = %s AND attempt = %d AND policy_version = %d", quote(a.Task), a.Attempt, a.Version)
	if purpose {
		s += " AND purpose = " + quote(a.Purpose)
	}
	e, err := query.ParseWhere(s)
	if err != nil {
		panic(fmt.Sprintf("ui: %s: %v", s, err)) // quote makes any task id a literal
	}
	return e
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// section is one part of a page read from one table: what it read, or
// why it could not, and the objects it read around.
type section[T any] struct {
	Rows    []T
	Err     string
	Damaged []query.Damage
}

// Bad says whether the section lacks some of its rows.
func (s section[T]) Bad() bool { return s.Err != "" || len(s.Damaged) > 0 }

// read is a section of rows of tbl as T (JSON names are the columns),
// read with o through the query layer, tolerating damaged objects.
func read[T any](ctx context.Context, st store.ObjectStore, tbl schemas.Table, o query.PageOptions) section[T] {
	o.Tolerate = true
	var s section[T]
	p, err := query.ReadPage(ctx, st, tbl, o)
	if err != nil {
		s.Err = err.Error()
		return s
	}
	defer p.Release()
	s.Damaged = p.Damaged
	if s.Rows, err = decode[T](p); err != nil {
		s.Err = err.Error()
	}
	return s
}

// Rows of the tables an attempt's page reads, the columns it shows.
type (
	trajectoryRow struct {
		Turns       int    `json:"turns"`
		Tokens      int64  `json:"tokens"`
		Chunks      int    `json:"chunks"`
		Compactions int    `json:"compactions"`
		Termination string `json:"termination"`
		Suite       string `json:"suite"`
		DurationMS  int64  `json:"duration_ms"`
		Sandbox     string `json:"sandbox"`
	}
	turnRow struct {
		Turn             int    `json:"turn"`
		Chunk            int    `json:"chunk"`
		Action           string `json:"action"`
		Observation      string `json:"observation"`
		Truncated        bool   `json:"truncated"`
		ObservationBytes int64  `json:"observation_bytes"`
		ExitCode         int    `json:"exit_code"`
		PromptTokens     int    `json:"prompt_tokens"`
		CompletionTokens int    `json:"completion_tokens"`
		Compacted        bool   `json:"compacted"`
		DurationMS       int64  `json:"duration_ms"`
	}
	rewardRow struct {
		Reward     float64             `json:"reward"`
		Passed     int                 `json:"passed"`
		Total      int                 `json:"total"`
		Source     string              `json:"source"`
		Fallback   bool                `json:"fallback"`
		Assertions []schemas.Assertion `json:"assertions"`
	}
	tokenRow struct {
		Chunk         int       `json:"chunk"`
		TokenIDs      []int32   `json:"token_ids"`
		LogProbs      []float32 `json:"logprobs"`
		LossMask      []bool    `json:"loss_mask"`
		TurnOffsets   []int32   `json:"turn_offsets"`
		DriftRepair   string    `json:"drift_repair"`
		StrictPrefix  int       `json:"repairs_strict_prefix"`
		ClippedNorm   int       `json:"repairs_clipped_norm"`
		TextRetokened int       `json:"repairs_text_retokened"`
		Temperature   float32   `json:"temperature"`
	}
	valueRow struct {
		Chunk      int       `json:"chunk"`
		Advantages []float32 `json:"advantages"`
	}
	routingRow struct {
		Chunk  int    `json:"chunk"`
		Record []byte `json:"record"`
	}
)

var (
	trajectoryCols = []string{"turns", "tokens", "chunks", "compactions", "termination", "suite", "duration_ms", "sandbox"}
	turnCols       = []string{"turn", "chunk", "action", "observation", "truncated", "observation_bytes", "exit_code",
		"prompt_tokens", "completion_tokens", "compacted", "duration_ms"}
	rewardCols = []string{"reward", "passed", "total", "source", "fallback", "assertions"}
	tokenCols  = []string{"chunk", "token_ids", "logprobs", "loss_mask", "turn_offsets", "drift_repair",
		"repairs_strict_prefix", "repairs_clipped_norm", "repairs_text_retokened", "temperature"}
	valueCols   = []string{"chunk", "advantages"}
	routingCols = []string{"chunk", "record"}
)

// of is the options that read the attempt's rows of a table, in the
// attempt's partition only.
func (a attemptRef) of(run string, purpose bool, cols []string) query.PageOptions {
	it := a.Iteration
	return query.PageOptions{Run: run, Where: a.where(purpose), Select: cols, Partition: &it}
}

// num writes a number short: integers whole, others to four digits,
// a missing one (nil, NaN) as a dash.
func num(x any) string {
	var v float64
	switch x := x.(type) {
	case float64:
		v = x
	case *float64:
		if x == nil {
			return "–"
		}
		v = *x
	case float32:
		v = float64(x)
	case int:
		v = float64(x)
	case int64:
		v = float64(x)
	default:
		return fmt.Sprint(x)
	}
	switch {
	case math.IsNaN(v):
		return "–"
	case v == math.Trunc(v) && math.Abs(v) < 1e9:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }
