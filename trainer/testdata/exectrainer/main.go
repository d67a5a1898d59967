// Command exectrainer stands in for an external trainer in the exec
// backend's tests. It reads the job file and either fails the way a
// crashing trainer does, reports a checkpoint it was given without
// training (actor jobs), or trains for real with the reference backend
// against the store, writing its checkpoint under exec/<checkpoint> so
// that the stage has to adopt it from elsewhere:
//
//	exectrainer -job FILE -out FILE [-manifest FILE] [-checkpoint DIR] [-reference FILE] [-exit N]
//
// The -reference file is JSON, {"store": s3.Config}: the store to train
// against. The settings are the job file's hyperparameters, as an external
// trainer takes them.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/t1pipe/t1/infra/s3"
	"github.com/t1pipe/t1/trainer"
)

func main() {
	jobPath := flag.String("job", "", "job file")
	manifest := flag.String("manifest", "", "batch manifest file, checked against the job's")
	out := flag.String("out", "", "result file to write")
	ckpt := flag.String("checkpoint", "", "checkpoint to report for actor jobs, without training")
	ref := flag.String("reference", "", "train with the reference backend against this file's store")
	exit := flag.Int("exit", 0, "exit with this status instead of training")
	flag.Parse()
	if *exit != 0 {
		fmt.Fprintln(os.Stderr, "CUDA out of memory (simulated)")
		os.Exit(*exit)
	}
	var job trainer.JobFile
	if err := readJSON(*jobPath, &job); err != nil || job.Run == "" || job.Checkpoint == "" {
		fail(3, "bad job:", err)
	}
	if *manifest != "" {
		var m struct {
			Run string `json:"run"`
		}
		if err := readJSON(*manifest, &m); err != nil || m.Run != job.Run {
			fail(3, "bad manifest:", err)
		}
	}
	var res any
	switch {
	case job.Kind == trainer.KindActor && *ckpt != "":
		res = map[string]any{
			"checkpoint": *ckpt,
			"metrics":    map[string]any{"steps": 1, "actions": job.Manifest.Tokens, "replay": true},
		}
	case *ref != "":
		var err error
		if res, err = train(job, *ref); err != nil {
			fail(5, err)
		}
	default:
		fail(2, "nothing to do for a", job.Kind, "job")
	}
	rb, _ := json.Marshal(res)
	if err := os.WriteFile(*out, rb, 0o644); err != nil {
		fail(4, err)
	}
}

// train runs the job with the reference backend and returns its result
// file's contents.
func train(job trainer.JobFile, refPath string) (any, error) {
	var ref struct{ Store s3.Config }
	if err := readJSON(refPath, &ref); err != nil {
		return nil, err
	}
	opt, err := job.Hyperparameters.Reference()
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	st, err := s3.Open(ctx, ref.Store)
	if err != nil {
		return nil, err
	}
	tr := trainer.NewReference(st, opt)
	at := "exec/" + job.Checkpoint
	switch job.Kind {
	case trainer.KindActor:
		r, err := tr.TrainActor(ctx, trainer.ActorJob{Manifest: job.Manifest, Policy: job.Policy, Out: at, Version: job.Version})
		if err != nil {
			return nil, err
		}
		return map[string]any{"kind": job.Kind, "checkpoint": r.Checkpoint, "metrics": r.Metrics}, nil
	case trainer.KindCritic:
		r, err := tr.TrainCritic(ctx, trainer.CriticJob{Manifest: job.Manifest, Critic: job.Critic, Fresh: job.Fresh, Policy: job.Policy, Out: at, Version: job.Version, GAE: *job.GAE})
		if err != nil {
			return nil, err
		}
		return map[string]any{"kind": job.Kind, "checkpoint": r.Checkpoint, "values": r.Values, "metrics": r.Metrics}, nil
	case trainer.KindSFT:
		r, err := tr.TrainSFT(ctx, trainer.SFTJob{Run: job.Run, Data: job.Data, Steps: job.Steps, Policy: job.Policy, Out: at, Version: job.Version, Seed: job.Seed})
		if err != nil {
			return nil, err
		}
		return map[string]any{"kind": job.Kind, "checkpoint": r.Checkpoint, "metrics": r.Metrics}, nil
	}
	return nil, fmt.Errorf("unknown job kind %q", job.Kind)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func fail(status int, args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(status)
}
