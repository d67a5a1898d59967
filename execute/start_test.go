package execute

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/pipeline"
)

// What would fail a run later fails it before anything starts: an engine
// that does not answer is the infrastructure's (exit 3), an initial
// checkpoint with no weights a failure of its own.
func TestStartChecksFirst(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	cfg.Inference.Backend, cfg.Inference.URL = "sglang", "http://127.0.0.1:1"
	sum, err := Start(ctx, io.Discard, cfg, true)
	if sum != nil || exit.Code(ctx, err) != exit.Infra {
		t.Fatalf("unreachable engine: %v, exit %d", err, exit.Code(ctx, err))
	}
	cfg = config.Default()
	cfg.Data = t.TempDir()
	cfg.Inference.Checkpoint = t.TempDir()
	if sum, err = Start(ctx, io.Discard, cfg, false); sum != nil || err == nil {
		t.Fatalf("empty initial checkpoint: %v", err)
	}
}

func TestBranchRefusesTwoStarts(t *testing.T) {
	o := pipeline.BranchOptions{Stage: "reward", Into: "b"}
	o.From.Seq = 3
	if _, err := Branch(context.Background(), io.Discard, config.Default(), o, "2026-11-29T20:00:00Z"); err == nil || err.Error() != "--from-seq and --since exclude each other" {
		t.Fatalf("--from-seq with --since: %v", err)
	}
	o.From.Seq = 0
	if _, err := Branch(context.Background(), io.Discard, config.Default(), o, "yesterday"); err == nil || !strings.HasPrefix(err.Error(), "--since: want an RFC 3339 time") {
		t.Fatalf("--since yesterday: %v", err)
	}
}

func TestReplayWriteResult(t *testing.T) {
	var b bytes.Buffer
	Replay{Stage: "reward", Run: "r", Into: "b"}.WriteResult(&b)
	if !strings.HasPrefix(b.String(), "stage reward: 0 events of r replayed into b") {
		t.Fatalf("%q", b.String())
	}
}
