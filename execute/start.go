package execute

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/config"
	"github.com/t1pipe/t1/exit"
	"github.com/t1pipe/t1/infra/inference"
	"github.com/t1pipe/t1/known"
	"github.com/t1pipe/t1/local"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/pipeline"
)

// Start runs cfg's run as `t1 run` does: its stages in this process when
// stages is set, else in t1 worker processes. What would fail the run
// later fails it first: an initial checkpoint the exec trainer could not
// start from (no weights, a shard missing), an engine that does not
// answer. Stopped, it returns a stopped summary and exit.ErrStopped; a
// failed run's summary comes with its error (exit 1).
func Start(ctx context.Context, w io.Writer, cfg config.Config, stages bool) (*Summary, error) {
	if ck := cfg.Inference.Checkpoint; ck != "" && inference.IsLocalCheckpoint(ck) {
		dir, err := filepath.Abs(ck)
		if err != nil {
			return nil, err
		}
		if err := checkpoint.CheckInitial(ctx, dir); err != nil {
			return nil, err
		}
	}
	at := Elsewhere
	if stages {
		opts := pipeline.InferenceOptions(cfg.Inference)
		// The engine serves the checkpoint's model: its config.json gives
		// the shape routing is checked against; one in the object store is
		// read once the store is open, so the probe is then /health alone.
		opts.Model = moe.Config{}
		if ck := cfg.Inference.Checkpoint; ck != "" && inference.IsLocalCheckpoint(ck) {
			shape, _, err := pipeline.ModelShape(cfg.Inference.Model, ck, nil)
			if err != nil {
				return nil, err
			}
			opts.Model = shape
		}
		if err := inference.Probe(ctx, opts); err != nil {
			return nil, exit.InfraError(err)
		}
		at = Shared
	}
	in, err := local.Open(ctx, cfg, local.Options{Serve: true})
	if err != nil {
		return nil, exit.InfraError(err)
	}
	defer in.Close()
	sum, err := Run(ctx, w, in, at)
	switch {
	case err != nil:
		return nil, err
	case sum == nil:
		return &Summary{Run: cfg.Run.ID, Status: "stopped", ExitCode: exit.Stopped}, exit.ErrStopped
	case sum.Status == "failed":
		return sum, exit.With(exit.Failed, fmt.Errorf("run %s failed: %s (t1 events list --run %s --type run.failed)", sum.Run, sum.Reason, sum.Run))
	}
	return sum, nil
}

// Branch is `t1 replay`: it branches o.Parent (default: cfg's run) into
// o.Into at o.Stage from since (RFC 3339) or o.From, and re-runs that
// stage alone, or with o.Continue the branch to its end. A continued
// branch that was stopped returns nil; one that failed, its replay with
// the error.
func Branch(ctx context.Context, w io.Writer, cfg config.Config, o pipeline.BranchOptions, since string) (*Replay, error) {
	if o.Parent == "" {
		o.Parent = cfg.Run.ID
	}
	switch {
	case o.From.Seq > 0 && since != "":
		return nil, fmt.Errorf("--from-seq and --since exclude each other")
	case since != "":
		var err error
		if o.From.Time, err = time.Parse(time.RFC3339, since); err != nil {
			return nil, fmt.Errorf("--since: want an RFC 3339 time such as 2026-11-29T20:00:00Z: %w", err)
		}
	}
	in, err := local.Open(ctx, cfg, local.Options{Serve: o.Continue})
	if err != nil {
		return nil, err
	}
	defer in.Close()
	if err := known.Run(ctx, in.Log, nil, o.Parent); err != nil {
		return nil, err
	}
	if !o.Continue {
		out, err := ReplayStage(ctx, in, o)
		if err != nil {
			return nil, err
		}
		return &out, nil
	}
	// Consumers of the branch's own: the log's shared ones, made now in a
	// data directory whose runs had consumers of their own (t1 ablate),
	// would deliver every earlier run's history to this process's
	// handlers, which redid all of its work before the branch's first
	// rollout.
	out, err := Continue(ctx, w, in, o, Own)
	if err != nil || out.Branch == nil {
		return nil, err
	}
	if out.Branch.Status == "failed" {
		return &out, fmt.Errorf("branch %s failed: %s (t1 events list --run %s --type run.failed)", o.Into, out.Branch.Reason, o.Into)
	}
	return &out, nil
}

// WriteResult prints how the replay ended: a continued branch's summary,
// else the replay of its stage.
func (s Replay) WriteResult(w io.Writer) {
	if s.Branch != nil {
		s.Branch.WriteText(w)
		return
	}
	s.WriteText(w)
}
