package pipeline_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/internal/testinfra/pipelinetest"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/rollout"
)

// meter is the engine side of one run: how long no request was in
// flight, from the first request to the end.
type meter struct {
	mu       sync.Mutex
	inflight int
	first    time.Time
	since    time.Time // when inflight last became 0
	idle     time.Duration
}

func (m *meter) begin() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	switch {
	case m.first.IsZero():
		m.first = now
	case m.inflight == 0:
		m.idle += now.Sub(m.since)
	}
	m.inflight++
}

func (m *meter) end() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inflight--
	if m.inflight == 0 {
		m.since = time.Now()
	}
}

// idleFraction is the share of [first request, until] with no request in
// flight.
func (m *meter) idleFraction(until time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	idle := m.idle
	if m.inflight == 0 {
		idle += until.Sub(m.since)
	}
	return idle.Seconds() / until.Sub(m.first).Seconds()
}

// slowEngine answers as its engine does after a turn latency drawn from
// a log-normal distribution (median Median, σ Sigma): most turns are
// quick and a few take many times the median, as a long reply or a
// queue behind other requests does. The draw is a hash of the request,
// so a rerun waits the same.
type slowEngine struct {
	inference.Engine
	median time.Duration
	sigma  float64
	m      *meter
}

func (e slowEngine) Generate(ctx context.Context, req inference.GenerateRequest) (*inference.GenerateResponse, error) {
	e.m.begin()
	defer e.m.end()
	h := fnv.New64a()
	for _, id := range req.InputIDs {
		binary.Write(h, binary.LittleEndian, int32(id))
	}
	// Two uniforms from the hash, Box–Muller to a standard normal.
	x := h.Sum64()
	u1 := (float64(x>>40) + 0.5) / (1 << 24)
	u2 := (float64(x&(1<<24-1)) + 0.5) / (1 << 24)
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	select {
	case <-time.After(time.Duration(float64(e.median) * math.Exp(e.sigma*z))):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return e.Engine.Generate(ctx, req)
}

// BenchmarkAsyncRollouts runs one tiny pipeline per staleness bound k and
// trainer, side by side: episodes of slow, uneven turns (log-normal,
// median 750 ms, σ 1) and either the reference trainer in process or an
// exec trainer that sleeps 2 s before every job, then trains with the
// reference backend in a process of its own (trainer/testdata/exectrainer),
// as a large model's update takes longer than the tiny one's. It reports
// iterations per hour, from the first iteration's start to the last
// update, and the fraction of that time the engine served no request.
//
//	go test ./tests/pipeline/ -run '^$' -bench AsyncRollouts -benchtime 1x -timeout 30m
func BenchmarkAsyncRollouts(b *testing.B) {
	for _, slow := range []time.Duration{2 * time.Second, 0} {
		name := "reference"
		if slow > 0 {
			name = fmt.Sprintf("exec+%s", slow)
		}
		for _, k := range []int{0, 1, 2} {
			b.Run(fmt.Sprintf("trainer=%s/k=%d", name, k), func(b *testing.B) {
				var perHour, idle float64
				for i := range b.N {
					ph, id := asyncRun(b, fmt.Sprintf("async-%d-%d-%d", slow/time.Second, k, i), k, slow)
					perHour, idle = perHour+ph, idle+id
				}
				b.ReportMetric(perHour/float64(b.N), "iter/h")
				b.ReportMetric(idle/float64(b.N), "engine-idle")
			})
		}
	}
}

func asyncRun(b *testing.B, run string, k int, slow time.Duration) (perHour, idle float64) {
	cfg := pipelinetest.Config(b)
	c := &cfg.Stages.Control
	c.Iterations, c.TasksPerIteration, c.Attempts, c.MaxTurns, c.EvalBaseline = 6, 4, 2, 4, false
	cfg.Stages.Eval.Suite = ""
	cfg.Training.MaxStaleness = k
	cfg.Run.ID = run
	l, st := testinfra.Log(b), testinfra.Store(b)
	m := &meter{}
	policies := pipeline.WithPolicies(func(configured rollout.Policies) rollout.Policies {
		return func(ctx context.Context, run string, v int64) (rollout.Policy, error) {
			p, err := configured(ctx, run, v)
			p.Engine = slowEngine{Engine: p.Engine, median: 750 * time.Millisecond, sigma: 1, m: m}
			return p, err
		}
	})
	if slow > 0 {
		cfg.Training.Trainer = config.TrainerBackend{Backend: "exec",
			Command: append([]string{"sh", "-c", fmt.Sprintf(`sleep %g && exec "$@"`, slow.Seconds()), "sh"}, testinfra.ExecTrainer(b)...)}
	}
	p := pipelinetest.Run(b, cfg, l, st, testinfra.Runner(16), []string{"control", "synth", "audit", "rollout", "reward", "critic", "ppo"}, policies)
	ev, err := engine.NewRootEvent(run, schemas.RunStarted, p.Hash(), p.Started())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Publish(context.Background(), ev); err != nil {
		b.Fatal(err)
	}
	testinfra.CheckFor(b, 20*time.Minute, func() error {
		if testinfra.Count(b, l, "t1."+run+"."+schemas.RunFailed) > 0 {
			b.Fatalf("run %s failed", run)
		}
		if n := testinfra.Count(b, l, "t1."+run+"."+schemas.RunCompleted); n == 0 {
			return fmt.Errorf("run %s: %d of %d updates", run, testinfra.Count(b, l, "t1."+run+"."+schemas.PolicyUpdated), c.Iterations)
		}
		return nil
	})
	first := testinfra.Events(b, l, "t1."+run+"."+schemas.IterationStarted)[0].Time
	var last time.Time
	for _, ev := range testinfra.Events(b, l, "t1."+run+"."+schemas.PolicyUpdated) {
		var pu schemas.PolicyUpdatedPayload
		if err := ev.Decode(&pu); err != nil {
			b.Fatal(err)
		}
		if ev.Time.After(last) {
			last = ev.Time
		}
	}
	span := last.Sub(first)
	b.Logf("%s: %d iterations in %s", run, c.Iterations, span.Round(time.Millisecond))
	return float64(c.Iterations) / span.Hours(), m.idleFraction(last)
}
