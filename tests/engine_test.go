package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/t1pipe/t1/digest"
	"github.com/t1pipe/t1/infra/inference/standin"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/moe"
)

// remotePipeline is tinyPipeline over two iterations, so the second
// samples from a policy PPO wrote, starting from the checkpoint %s.
func remotePipeline(checkpoint string) string {
	return strings.Replace(tinyPipeline, "    iterations: 1\n", "    iterations: 2\n", 1) + "inference:\n  checkpoint: " + checkpoint + "\n"
}

// `t1 run` against stand-ins of the real engines, as strict as SGLang
// 0.5.23 and vLLM 0.34.0, which serve at f32 what t1's own engine
// computes: a pool of three SGLang engines, one killed in the middle of
// its first request of the second iteration, and one vLLM engine. Each
// run completes with the same artifacts, row for row, as the same run on the embedded engine at
// f32: every attempt sampled the tokens, log-probs and experts of the
// version it records, the killed engine's request was answered once by
// another engine, nothing was lost or played twice. Every engine loaded
// the versions it served from the weights directory, and every update saw
// served log-probs its own forward reproduces with no routing mismatch.
func TestRunOnRealEngines(t *testing.T) {
	testinfra.Long(t)
	t.Parallel()
	testinfra.Bubblewrap(t)
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	m, err := moe.NewModel(moe.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ck := t.TempDir()
	if err := (&moe.Checkpoint{Model: m, Tokenizer: tok}).SaveDir(ck); err != nil {
		t.Fatal(err)
	}
	base := remotePipeline(ck)

	// The same run on the embedded engine, serving at f32 as the
	// stand-ins do, runs beside the others; they compare with it once it
	// is done.
	// Its digest is taken once: two t1 processes on one data directory
	// would share its embedded servers, and the first to exit stops them.
	embeddedDone := make(chan *digest.Digest, 1)
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		var d *digest.Digest
		defer func() { embeddedDone <- d; close(embeddedDone) }()
		data, cfg := t.TempDir(), writeConfig(t, base+"  precision: f32\n")
		completeRun(t, data, cfg)
		d = runDigest(t, data, cfg, "tiny")
	})
	embeddedDigest := sync.OnceValue(func() *digest.Digest { return <-embeddedDone })

	serve := func(t *testing.T, h standin.Restarter) *standin.Server {
		srv, err := standin.Serve(h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		return srv
	}
	for _, c := range []struct {
		name    string
		engines func(t *testing.T) []*standin.Server
		backend string
	}{
		{"sglang-pool", func(t *testing.T) []*standin.Server {
			var s []*standin.Server
			for range 3 {
				s = append(s, serve(t, standin.NewSGLang(m, standin.SGLangOptions{ReturnRoutedExperts: true, Deterministic: true})))
			}
			// Iteration 2 samples from version 2, the first PPO update; its
			// first episode goes to the first engine, which dies on the
			// request.
			s[0].KillAfter(1, "2")
			return s
		}, "sglang"},
		{"vllm", func(t *testing.T) []*standin.Server {
			return []*standin.Server{serve(t, standin.NewVLLM(m, standin.VLLMOptions{Version: standin.VLLM034, ReturnRoutedExperts: true, ServedModelName: "t1"}))}
		}, "vllm"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			engines := c.engines(t)
			var urls []string
			for _, e := range engines {
				urls = append(urls, e.URL)
			}
			weights, data := t.TempDir(), t.TempDir()
			cfg := writeConfig(t, base+fmt.Sprintf("  backend: %s\n  urls: [%s]\n  weights_dir: %s\n  served_model: t1\n", c.backend, strings.Join(urls, ", "), weights))
			completeRun(t, data, cfg)
			want := embeddedDigest()
			if want == nil {
				t.Fatal("the embedded run failed: nothing to compare with")
			}
			sameDigest(t, want, runDigest(t, data, cfg, "tiny"))

			if len(engines) > 1 {
				if v := engines[0].Handler().WeightVersion(); v != "2" {
					t.Errorf("the engine to be killed in iteration 2 ended serving version %q", v)
				}
				if !engines[0].Killed() {
					t.Error("the engine was never killed: iteration 2 never sampled from it")
				}
				for _, e := range engines[1:] {
					if e.Generates() == 0 {
						t.Errorf("engine %s served nothing", e.URL)
					}
				}
			}
			// Versions 0 (base), 1 (fine-tuned), 2 and 3 (PPO) were each
			// exported in the Hugging Face layout for the engines.
			for v := range 4 {
				b, err := os.ReadFile(filepath.Join(weights, "tiny", fmt.Sprintf("v%06d", v), "config.json"))
				var hf struct {
					ModelType string `json:"model_type"`
				}
				if err != nil || json.Unmarshal(b, &hf) != nil || hf.ModelType != "qwen3_moe" {
					t.Errorf("version %d: %s %v", v, b, err)
				}
			}
			for name, r := range testinfra.ActorReports(t, data, "tiny", 2) {
				if r.Actions == 0 || r.LogProbGapMax != 0 || !r.Replay || r.RoutingSets == 0 || r.RoutingMismatches != 0 {
					t.Errorf("%s: %+v: the served log-probs or experts are not the trained policy's", name, r)
				}
			}
		})
	}
}
