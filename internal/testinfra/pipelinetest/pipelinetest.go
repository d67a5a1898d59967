// Package pipelinetest runs stages of the pipeline the t1 command runs,
// wired by pipeline.Build, on a test's log and store, so integration tests
// exercise the production wiring rather than a copy of it. It is apart
// from testinfra because the stages' own tests use testinfra, and the
// pipeline imports every stage.
package pipelinetest

import (
	"context"
	"sync"
	"testing"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/pipeline"
	"github.com/t1pipe/t1/store"
)

// Config is the default configuration on the bubblewrap sandbox, scaled
// down for tests: replies of at most 32 tokens, a pool of a few tasks,
// every one in each of two iterations of two attempts, no fine-tuning,
// three evaluation tasks. It skips the test where bubblewrap cannot run,
// as testinfra.Bubblewrap does.
func Config(t testing.TB) config.Config {
	t.Helper()
	testinfra.Bubblewrap(t)
	cfg := config.Default()
	cfg.Sandbox.Backend = "bwrap"
	cfg.Stages.Rollout.MaxNewTokens = 32
	c := &cfg.Stages.Control
	c.PoolTarget, c.Seeds, c.Iterations, c.TasksPerIteration, c.Attempts, c.SFTSteps = 6, 4, 2, 0, 2, 0
	cfg.Stages.Eval.Tasks, cfg.Stages.Eval.Rounds = 3, 1
	return cfg
}

// Run builds cfg's pipeline on l and st, runs the named stages, each with
// rc, until the test ends, and returns the pipeline.
func Run(t testing.TB, cfg config.Config, l *engine.Log, st store.ObjectStore, rc engine.RunnerConfig, stages []string, opts ...pipeline.Option) *pipeline.Pipeline {
	t.Helper()
	p, _ := Start(t, cfg, l, st, rc, stages, opts...)
	return p
}

// Start is Run with a stop function: it stops the stages and waits for
// them (the test's end does too), so a test can replay into a branch with
// no stage consuming what the replay emits, then start them again.
func Start(t testing.TB, cfg config.Config, l *engine.Log, st store.ObjectStore, rc engine.RunnerConfig, stages []string, opts ...pipeline.Option) (*pipeline.Pipeline, func()) {
	t.Helper()
	// The test binary's embedded gateway moved the working directory.
	p, err := pipeline.Build(cfg, l, st, append([]pipeline.Option{pipeline.WithWorkDir(testinfra.WorkDir())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, name := range stages {
		s, err := p.Stage(name)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		r := engine.NewRunner(l, s, rc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(ctx); err != nil {
				t.Errorf("stage %s: %v", s.Name(), err)
			}
		}()
	}
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return p, stop
}
