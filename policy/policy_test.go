package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/pipeline"
)

// Replayed routing matches the served routing exactly; live routing
// differs from it in bf16.
func TestMeasureGap(t *testing.T) {
	cfg := config.Default()
	opts := pipeline.InferenceOptions(cfg.Inference)
	opts.Checkpoint, opts.Precision = "", "bf16"
	g, err := MeasureGap(context.Background(), cfg, opts, GapOptions{Prompts: 1, MaxNewTokens: 16, SFTSteps: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g.Report.Generated != 16 || g.Report.ReplayOn.Mismatches != 0 || g.SFTSteps != 1 {
		t.Fatalf("%+v", g.Report)
	}
	var b bytes.Buffer
	if err := g.WriteText(&b); err != nil || !strings.Contains(b.String(), "replayed (R³)      0 / ") {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if _, err := MeasureGap(context.Background(), cfg, opts, GapOptions{MaxNewTokens: 1}); err == nil {
		t.Fatal("no prompts accepted")
	}
}

// The server answers once it says it listens, and stops with its context.
func TestServe(t *testing.T) {
	cfg := config.Default()
	opts := pipeline.InferenceOptions(cfg.Inference)
	opts.Checkpoint, opts.Version = "", "3"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	ready := make(chan Serving, 1)
	go func() { done <- Serve(ctx, cfg, opts, "127.0.0.1:0", func(s Serving) { ready <- s }) }()
	var s Serving
	select {
	case s = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	if s.WeightVersion != "3" || !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Fatalf("%+v", s)
	}
	resp, err := http.Post(s.URL+"/generate", "application/json", strings.NewReader(`{"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2}}`))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v %v", resp.StatusCode, err, out)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}
