package report

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// metricsV10 and metricsV11 are the metrics table as schema 1.0 wrote it
// and with the columns 1.1 adds, so the loader is checked against both
// whatever this build's MetricRow holds.
type metricsV10 struct {
	Run               string  `parquet:"run,dict"`
	Iteration         int32   `parquet:"iteration"`
	PolicyVersion     int64   `parquet:"policy_version"`
	Trajectories      int32   `parquet:"trajectories"`
	Tokens            int64   `parquet:"tokens"`
	RewardMean        float64 `parquet:"reward_mean"`
	ResolveRate       float64 `parquet:"resolve_rate"`
	ExplainedVariance float64 `parquet:"explained_variance"`
	LogProbGap        float64 `parquet:"logprob_gap"`
	ClipFraction      float64 `parquet:"clip_fraction"`
	PolicyLoss        float64 `parquet:"policy_loss"`
	ValueLoss         float64 `parquet:"value_loss"`
	StrictPrefix      int64   `parquet:"repairs_strict_prefix"`
	ClippedNorm       int64   `parquet:"repairs_clipped_norm"`
	TextRetokened     int64   `parquet:"repairs_text_retokened"`
	NewChunk          int64   `parquet:"repairs_new_chunk"`
	RoutingFlips      float64 `parquet:"routing_flip_rate"`
}

func (metricsV10) Table() schemas.Table {
	t := schemas.MetricsTable
	t.Version = schemas.Version{Major: 1, Minor: 0}
	return t
}

type metricsV11 struct {
	metricsV10
	ApproxKL          float64 `parquet:"approx_kl"`
	GradNorm          float64 `parquet:"grad_norm"`
	RoutingMismatches int64   `parquet:"routing_mismatches"`
	LossDrift         int64   `parquet:"loss_drift"`
}

func (metricsV11) Table() schemas.Table {
	t := schemas.MetricsTable
	t.Version = schemas.Version{Major: 1, Minor: 1}
	return t
}

// fixture is a run written with the pipeline's own writers: events on
// the log, tables and training reports in the store.
type fixture struct {
	run    string
	replay bool
	gap    float64 // log-prob gap of the first iteration
	// stale makes the second update train a batch one version stale
	// (training.max_staleness).
	stale bool
}

func publish(t testing.TB, l *engine.Log, run, typ, key string, payload any) {
	t.Helper()
	ev, err := engine.NewRootEvent(run, typ, key, payload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
}

func write[T schemas.Row](t testing.TB, st store.ObjectStore, run string, part int, rows []T) schemas.FileRef {
	t.Helper()
	ref, err := schemas.WriteTable(context.Background(), st, run, part, rows, schemas.WriterOptions{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func (f fixture) seed(t testing.TB, l *engine.Log, st store.ObjectStore) {
	t.Helper()
	ctx := context.Background()
	run := f.run
	publish(t, l, run, schemas.RunStarted, "", schemas.RunStartedPayload{Seed: 7, ConfigHash: "c0ffee", Iterations: 2, RewardScale: 1,
		Model:      schemas.ModelDims{Vocab: 512, Layers: 2, TopK: 2, Experts: 8},
		EvalSuites: []string{"builtin"}})
	publish(t, l, run, schemas.PoolSealed, "1", schemas.PoolSealedPayload{PoolVersion: 1, Tasks: 4, Excluded: 1,
		Categories: map[string]int{"files": 3, "data": 1}})
	for it := 1; it <= 2; it++ {
		base := metricsV10{Run: run, Iteration: int32(it), PolicyVersion: int64(it), Trajectories: 4, Tokens: 900,
			RewardMean: 0.5 * float64(it), ResolveRate: 0.25 * float64(it), ExplainedVariance: -0.2 + 0.3*float64(it),
			LogProbGap: f.gap / float64(it), ClipFraction: 0.1, PolicyLoss: -0.01, ValueLoss: 0.3,
			StrictPrefix: 5, ClippedNorm: int64(it), TextRetokened: 2, NewChunk: 1, RoutingFlips: 0.006}
		if it == 1 {
			write(t, st, run, it, []metricsV10{base})
		} else {
			write(t, st, run, it, []metricsV11{{metricsV10: base, ApproxKL: 0.002, GradNorm: 1.5, RoutingMismatches: 3}})
		}
		met := map[string]any{"replay": f.replay, "logprob_gap": base.LogProbGap}
		if f.stale && it == 2 {
			met["staleness"], met["behaviour_kl"], met["truncated"] = 1, 0.0125, 0.002
		}
		rep, _ := json.Marshal(map[string]any{"metrics": met})
		if _, err := st.Put(ctx, keys.TrainingReport(run, it, int64(it)), bytes.NewReader(rep), int64(len(rep)), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		var trajs []schemas.TrajectoryRow
		var rewards []schemas.RewardRow
		for a := range 4 {
			task := fmt.Sprintf("task-%d", a)
			trajs = append(trajs, schemas.TrajectoryRow{Run: run, TaskID: task, Attempt: 0, Iteration: int32(it), Purpose: schemas.PurposeTrain,
				PolicyVersion: int64(it - 1), Turns: int32(2 + a*it), Tokens: 200, Chunks: 1, Termination: []string{"done", "max_turns"}[a%2]})
			rewards = append(rewards, schemas.RewardRow{Run: run, TaskID: task, Iteration: int32(it), Purpose: schemas.PurposeTrain,
				PolicyVersion: int64(it - 1), Passed: int32(a % 3), Total: 2, Scale: 1, Reward: float64(a % 3)})
		}
		write(t, st, run, it, trajs)
		write(t, st, run, it, rewards)
		publish(t, l, run, schemas.PolicyUpdated, fmt.Sprint(it), schemas.PolicyUpdatedPayload{Iteration: it, PolicyVersion: int64(it), PreviousVersion: int64(it - 1)})
	}
	for _, v := range []int64{0, 2} {
		var rows []schemas.EvalResultRow
		for a := range 3 {
			rows = append(rows, schemas.EvalResultRow{Run: run, Suite: "builtin", TaskID: "eval-0", Attempt: int32(a), PolicyVersion: v,
				Reward: float64(v), Passed: int32(v), Total: 2, Solved: v == 2 && a > 0, Turns: 3, Difficulty: "easy", Category: "files"})
		}
		ref := write(t, st, run, int(v), rows)
		// The verifier's checks of each attempt: v2 writes the file in
		// every attempt and the right word in two of three.
		var rewards []schemas.RewardRow
		for a := range 3 {
			rewards = append(rewards, schemas.RewardRow{Run: run, TaskID: "eval-0", Attempt: int32(a), Purpose: schemas.PurposeEval,
				PolicyVersion: v, Passed: int32(v), Total: 2, Scale: 1, Reward: float64(v), Assertions: []schemas.Assertion{
					{Name: "test_outputs::test_exists", Passed: v == 2}, {Name: "test_outputs::test_holds_word", Passed: v == 2 && a > 0}}})
		}
		write(t, st, run, int(v), rewards)
		publish(t, l, run, schemas.EvalCompleted, fmt.Sprint(v), schemas.EvalCompletedPayload{Suite: "builtin", PolicyVersion: v, Tasks: 1, Attempts: 3,
			ResolveRate: float64(v) / 3, MeanReward: float64(v) / 2, MeanTurns: 3,
			ByDifficulty: map[string]schemas.Breakdown{"easy": {Attempts: 3, ResolveRate: float64(v) / 3, MeanReward: float64(v) / 2}},
			ByCategory:   map[string]schemas.Breakdown{"files": {Attempts: 3, ResolveRate: float64(v) / 3, MeanReward: float64(v) / 2}},
			Results:      []schemas.FileRef{ref}})
	}
	publish(t, l, run, "reward.scored.failed", "x", map[string]string{"reason": "verifier crashed"})
	publish(t, l, run, schemas.RunCompleted, "", schemas.RunCompletedPayload{Iterations: 2, PolicyVersion: 2, PoolTasks: 4})
}

func load(t *testing.T, l *engine.Log, st store.ObjectStore, run string) *Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := Load(ctx, l, st, run)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// plotted are the figures of a one-run report whose fixture has data.
var plotted = []string{"pool-categories", "reward", "explained-variance", "logprob-gap", "drift-repairs", "turns",
	"eval-builtin", "eval-builtin-difficulty", "eval-builtin-category"}

// Load reads a run's events and tables (metrics of schema 1.0 and 1.1
// side by side) and the report shows every plot as inline SVG, and the
// variants side by side.
func TestLoadAndRender(t *testing.T) {
	l, st := testinfra.Log(t), testinfra.Store(t)
	fixture{run: "r1", replay: true, gap: 0.013}.seed(t, l, st)
	fixture{run: "r2", replay: false, gap: 0.021, stale: true}.seed(t, l, st)
	r := load(t, l, st, "r1")
	// The trainer's figures of a stale batch are columns of the run that
	// trained one.
	if m := load(t, l, st, "r2").Metrics; !m.Has(ColStaleness) || !m.Has(ColTruncated) {
		t.Errorf("stale run's columns %v", m.Columns)
	} else if v, _ := m.Rows[1].Value(ColBehaviourKL); v != 0.0125 {
		t.Errorf("stale update's row %+v", m.Rows[1])
	} else if _, ok := m.Rows[0].Value(ColStaleness); ok {
		t.Errorf("a synchronous update has a staleness: %+v", m.Rows[0])
	}
	if r.Metrics.Has(ColStaleness) {
		t.Errorf("a synchronous run shows staleness: %v", r.Metrics.Columns)
	}

	if r.Status != StatusCompleted || r.Config.Seed != 7 || r.Config.RewardScale != 1 || r.Config.Iterations != 2 || r.PolicyVersion != 2 {
		t.Fatalf("run facts %+v", r)
	}
	if r.Events[schemas.PolicyUpdated] != 2 || r.Events[schemas.EvalCompleted] != 2 || r.Failed != 1 || r.DeadLetters != 0 {
		t.Errorf("events %v, failed %d, dead letters %d", r.Events, r.Failed, r.DeadLetters)
	}
	if r.Started.IsZero() || r.Ended.Before(r.Started) {
		t.Errorf("started %v ended %v", r.Started, r.Ended)
	}
	m := r.Metrics
	if len(m.Rows) != 2 || strings.Join(m.Versions, ",") != "1.0,1.1" {
		t.Fatalf("metrics %+v", m)
	}
	if _, ok := m.Rows[0].Value(ColApproxKL); ok {
		t.Error("a 1.0 row has approx_kl")
	}
	if v, _ := m.Rows[1].Value(ColApproxKL); v != 0.002 || !m.Has(ColGradNorm) || !m.Has(ColLossDrift) {
		t.Errorf("1.1 columns: %v, columns %v", m.Rows[1].Values, m.Columns)
	}
	if v, _ := m.Rows[0].Value(ColLogProbGap); v != 0.013 || m.Rows[0].Replay == nil || !*m.Rows[0].Replay {
		t.Errorf("row 1 %+v", m.Rows[0])
	}
	if len(r.Attempts) != 8 || len(r.Rewards) != 14 || len(r.EvalResults) != 6 || len(r.Evals) != 2 || len(r.Pools) != 1 {
		t.Fatalf("%d attempts, %d rewards, %d eval results, %d evals, %d pools", len(r.Attempts), len(r.Rewards), len(r.EvalResults), len(r.Evals), len(r.Pools))
	}
	if e := r.Evals[1]; e.PolicyVersion != 2 || e.ByDifficulty["easy"].Attempts != 3 || r.Pools[0].Categories["files"] != 3 {
		t.Errorf("eval %+v, pool %+v", e, r.Pools[0])
	}

	md, html, err := Render([]*Run{r})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range plotted {
		if !bytes.Contains(html, []byte(`<figure id="fig-`+id+"\">\n<svg")) {
			t.Errorf("figure %s has no SVG", id)
		}
	}
	if n := bytes.Count(html, []byte("<svg")); n != len(plotted) {
		t.Errorf("%d SVG elements, want %d", n, len(plotted))
	}
	if bytes.Contains(html, []byte("no data")) || regexp.MustCompile(`(?i)(src|href)="?(https?:)?//`).Match(html) {
		t.Error("the page has a no-data figure or fetches something")
	}
	for _, want := range []string{"approx KL", "grad norm", "routing mismatches", "| 1 | v1 |", "eval-0", "files 3", "| reward.scored.failed | 1 |",
		"| builtin | test_outputs::test_exists | 0/3 | 3/3 |", "| builtin | test_outputs::test_holds_word | 0/3 | 2/3 |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}

	r2 := load(t, l, st, "r2")
	md, html, err = Render([]*Run{r, r2})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Variants", "| routing replay | on | off |", "| final log-prob gap | 0.0065 | 0.0105 |", "| mean log-prob gap | 0.00975 | 0.01575 |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("comparison lacks %q:\n%s", want, md)
		}
	}
	for _, want := range []string{"r1 (replay on)", "r2 (replay off)", `id="variants"`} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("html lacks %q", want)
		}
	}
}

// The same run renders to the same bytes, loaded and rendered twice.
func TestRenderDeterministic(t *testing.T) {
	l, st := testinfra.Log(t), testinfra.Store(t)
	fixture{run: "d1", replay: true, gap: 0.02}.seed(t, l, st)
	fixture{run: "d2", gap: 0.03}.seed(t, l, st)
	var mds, htmls [2][]byte
	for i := range 2 {
		var err error
		mds[i], htmls[i], err = Render([]*Run{load(t, l, st, "d1"), load(t, l, st, "d2")})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(htmls[0], htmls[1]) || !bytes.Equal(mds[0], mds[1]) {
		t.Fatal("two renders of the same runs differ")
	}
}

// A run with nothing but its start renders every plot as a note.
func TestRenderNoData(t *testing.T) {
	r := &Run{ID: "empty", Status: StatusRunning, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	_, html, err := Render([]*Run{r})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(html, []byte("<svg")) {
		t.Error("an empty run has a plot")
	}
	for _, id := range []string{"pool-categories", "reward", "explained-variance", "logprob-gap", "drift-repairs", "turns"} {
		if !regexp.MustCompile(`<figure id="fig-` + id + `">\n<p class="nodata">[^<]*: no data</p>`).Match(html) {
			t.Errorf("figure %s is not a no-data note", id)
		}
	}
	if _, _, err := Render(nil); err == nil {
		t.Error("rendering no run succeeded")
	}
}

func TestLoadUnknownRun(t *testing.T) {
	l, st := testinfra.Log(t), testinfra.Store(t)
	fixture{run: "known", replay: true, gap: 0.02}.seed(t, l, st)
	publish(t, l, "branch", schemas.RewardScored, "1", schemas.RewardScoredPayload{TaskID: "task-0", Purpose: schemas.PurposeTrain})
	_, err := Load(context.Background(), l, st, "nope")
	if err == nil || !strings.Contains(err.Error(), `unknown run "nope"`) || !strings.Contains(err.Error(), "runs in the log: branch, known") {
		t.Fatalf("err %v", err)
	}
	// A branch has events but no run.started.
	if r := load(t, l, st, "branch"); r.Status != StatusUnstarted || r.Events[schemas.RewardScored] != 1 {
		t.Errorf("branch %+v", r)
	}
	if _, err := Load(context.Background(), l, st, "bad run"); err == nil {
		t.Fatal("an invalid run id loaded")
	}
}

// A table object that does not read fails the load, naming the object.
func TestLoadBadTable(t *testing.T) {
	l, st := testinfra.Log(t), testinfra.Store(t)
	fixture{run: "broken", replay: true, gap: 0.02}.seed(t, l, st)
	part := func(t schemas.Table, partition int, sha string) string {
		key, err := keys.TableObject("broken", t.Name, t.Partition, partition, sha)
		if err != nil {
			panic(err)
		}
		return key
	}
	for _, tc := range []struct{ key, data string }{
		{part(schemas.MetricsTable, 3, "0000000000000000000000000000dead"), "not parquet at all"},
		{part(schemas.EvalResultsTable, 9, "0000000000000000000000000000beef"), "PAR1 truncated"},
	} {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(tc.key))), func(t *testing.T) {
			ctx := context.Background()
			if _, err := st.Put(ctx, tc.key, strings.NewReader(tc.data), int64(len(tc.data)), store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			defer st.Delete(ctx, tc.key)
			_, err := Load(ctx, l, st, "broken")
			if err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("err %v, want one naming %s", err, tc.key)
			}
		})
	}
}

// The Markdown of hand-built runs (testdata/*.json, a list of runs: the
// first and its variants) matches testdata/*.md; -update rewrites them.
func TestMarkdownGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(testinfra.WorkDir(), "testdata", "*.json"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var runs []*Run
			if err := json.Unmarshal(data, &runs); err != nil {
				t.Fatal(err)
			}
			md, _, err := Render(runs)
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(in, ".json") + ".md"
			if *update {
				if err := os.WriteFile(golden, md, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(md, want) {
				t.Errorf("markdown differs from %s (go test ./report -run Golden -update):\n%s", golden, md)
			}
		})
	}
}
