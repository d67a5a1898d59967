package inference_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/infra/inference/standin"
	"github.com/t1pipe/t1/moe"
)

// TestPoolSurvivesAKilledEngine: three SGLang engines serve one run's
// episodes. One is killed in the middle of a request; its episodes carry
// on on the other two, and every request is answered exactly once, by
// the weights of the version it asked for. Restarted, the engine is used
// again only after it loaded the next version like the others.
func TestPoolSurvivesAKilledEngine(t *testing.T) {
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	initial := standinModel(t)
	models, dirs := map[string]*moe.Model{}, map[string]string{}
	for i, v := range []string{"1", "2"} {
		cfg := initial.Cfg
		cfg.Seed = uint64(70 + i)
		m, err := moe.NewModel(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := (&moe.Checkpoint{Model: m, Tokenizer: tok}).SaveDir(dir); err != nil {
			t.Fatal(err)
		}
		models[v], dirs[v] = m, dir
	}
	var servers []*standin.Server
	var clients []inference.WeightLoader
	var names []string
	for range 3 {
		srv, err := standin.Serve(standin.NewSGLang(initial, standin.SGLangOptions{ReturnRoutedExperts: true, Deterministic: true}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		servers, clients, names = append(servers, srv), append(clients, sglangClient(t, srv.URL)), append(names, srv.URL)
	}
	pool := inference.NewPool(clients, names)
	pool.Retry = 50 * time.Millisecond
	killed := servers[1]
	killed.KillAfter(3, "")

	const episodes, turns = 9, 4
	play := func(version string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, episodes)
		for e := range episodes {
			wg.Go(func() {
				eng, release, err := pool.Hold(context.Background(), version, func(context.Context) (string, error) { return dirs[version], nil })
				if err != nil {
					errs <- err
					return
				}
				defer release()
				for turn := range turns {
					req := inference.GenerateRequest{InputIDs: append(standinPrompt(), e, turn), ReturnLogprob: true, ReturnRoutedExperts: true,
						SamplingParams: inference.SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 6, Seed: uint64(100*e + turn)}}
					got, err := eng.Generate(context.Background(), req)
					if err != nil {
						errs <- fmt.Errorf("episode %d turn %d: %w", e, turn, err)
						return
					}
					want := reference(t, models[version], req)
					if got.WeightVersion != version || !slices.Equal(got.OutputIDs, want.OutputIDs) ||
						!slices.Equal(got.OutputTokenLogprobs, want.OutputTokenLogprobs) || !slices.Equal(got.RoutedExperts.Experts, want.RoutedExperts.Experts) {
						errs <- fmt.Errorf("episode %d turn %d: served by weights %s, not version %s's", e, turn, got.WeightVersion, version)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}

	play("1")
	served := pool.Served()
	total := 0
	for _, n := range served {
		total += n
	}
	if total != episodes*turns {
		t.Errorf("the engines answered %d requests, want %d (each exactly once): %v", total, episodes*turns, served)
	}
	// Killed on its third request, it cut that one and any other in flight.
	if killed.Generates() != 3 || served[killed.URL] > 2 {
		t.Errorf("the killed engine got %d requests and answered %d; want 3 and at most 2", killed.Generates(), served[killed.URL])
	}
	for _, s := range servers {
		if s != killed && served[s.URL] == 0 {
			t.Errorf("engine %s answered nothing: %v", s.URL, served)
		}
	}

	// Restarted, it serves its initial weights as version "default"; the
	// pool has it load version 2 before it answers for it.
	if err := killed.Revive(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * pool.Retry)
	before := killed.Generates()
	play("2")
	if killed.Generates() == before {
		t.Errorf("the restarted engine was never used again: %v", pool.Served())
	}
	for i, s := range servers {
		h := s.Handler().(*standin.SGLang)
		if v := h.WeightVersion(); v != "2" {
			t.Errorf("engine %d serves weight version %q after version 2's episodes, want 2", i, v)
		}
	}
}
