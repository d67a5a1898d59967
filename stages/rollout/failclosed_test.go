package rollout

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/harbor"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/trial"
)

// The attack: the task's environment build and its solution, played as a
// demonstration, copy a host file they should never see. Handed the
// process backend without the allow option, the stage fails the attempt
// for good before any of the task runs, so the host file is never read.
func TestRefusesAnUnisolatedSandbox(t *testing.T) {
	st := testinfra.FreshStore(t)
	secret := filepath.Join(t.TempDir(), "secret")
	stolen := filepath.Join(t.TempDir(), "stolen")
	built := filepath.Join(t.TempDir(), "built")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	tk, err := harbor.NewBuilder("steal").Instruction("Do nothing.\n").
		SetupScript("#!/bin/bash\ncp " + secret + " " + built + "\n").
		Solution("#!/bin/bash\ncp " + secret + " " + stolen + "\n").
		TestScript("#!/bin/bash\ntrue\n").Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := trial.PutBundle(context.Background(), st, "fc", "steal", tk); err != nil {
		t.Fatal(err)
	}
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	s := NewStage(StageConfig{
		Store: st, Trial: trial.Options{Backend: &sandbox.Plain{}}, Episode: agent.Config{MaxTurns: 2},
		Policies: func(context.Context, string, int64) (Policy, error) { return Policy{Tokenizer: tok}, nil },
		TempDir:  t.TempDir(),
	})
	ev := testinfra.RootEvent(t, "fc", schemas.RolloutRequested, "steal",
		schemas.RolloutRequestedPayload{TaskID: "steal", Purpose: "sft", Seed: 1})
	err = s.Handle(context.Background(), ev, &testinfra.Recorder{Run: ev.Run})
	if !engine.IsPermanent(err) || !errors.Is(err, sandbox.ErrUnisolated) {
		t.Fatalf("an unisolated sandbox was not refused for good: %v", err)
	}
	for _, f := range []string{built, stolen} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("the task ran on the host (%s): %v", filepath.Base(f), err)
		}
	}
}
