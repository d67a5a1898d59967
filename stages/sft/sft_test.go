package sft

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/t1pipe/t1/agent"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/engine"
	"github.com/t1pipe/t1/infra/sandbox"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/store"
	"github.com/t1pipe/t1/trainer"
)

func TestMain(m *testing.M) { os.Exit(testinfra.Main(m)) }

// echoShell answers every command with its script, for machines without
// bubblewrap: SFT needs the demonstration's tokens, not its effects.
type echoShell struct{}

func (echoShell) Run(_ context.Context, script string, _ sandbox.RunOptions) (sandbox.Result, error) {
	return sandbox.Result{Stdout: script + "\n"}, nil
}

func shell(t *testing.T) agent.Shell {
	t.Helper()
	bw := &sandbox.Bubblewrap{}
	if err := bw.Available(); err != nil {
		t.Logf("bubblewrap unavailable (%v): commands are echoed", err)
		return echoShell{}
	}
	sb, err := bw.Start(context.Background(), sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	sh, err := sb.Shell(context.Background(), sandbox.ShellOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return sh
}

// demonstrations replays two reference solutions through the harness and
// stores their token rows, the SFT data.
func demonstrations(t *testing.T, st store.ObjectStore, tok *moe.Tokenizer) ([]schemas.TokenRow, schemas.FileRef) {
	t.Helper()
	ctx := context.Background()
	own, err := moe.NewChat(tok)
	if err != nil {
		t.Fatal(err)
	}
	tp := agent.OwnChat(own)
	var rows []schemas.TokenRow
	for a, script := range []string{"mkdir -p /app/out\necho hello > /app/out/greeting.txt\ncat /app/out/greeting.txt\n", "ls /app\nwc -c /app/out/greeting.txt\n"} {
		pol, err := agent.FromSolution(tp, agent.Tags(), script)
		if err != nil {
			t.Fatal(err)
		}
		res, err := agent.Run(ctx, pol, tp, shell(t), "Write hello to /app/out/greeting.txt.", agent.Config{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ar, err := agent.AttemptRows(run, schemas.RolloutRequestedPayload{TaskID: "greet", Attempt: a, Purpose: schemas.PurposeTrain}, res, 8, "", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, ar.Tokens...)
	}
	ref, err := schemas.WriteTable(ctx, st, run, 0, rows, schemas.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rows, ref
}

const run = "sft"

var runnerCfg = engine.RunnerConfig{Concurrency: 1, AckWait: time.Minute, MaxDeliver: 2, Backoff: []time.Duration{100 * time.Millisecond}}

func sftOptions() trainer.ReferenceOptions {
	adam := moe.DefaultAdam()
	adam.LR = 3e-3
	return trainer.ReferenceOptions{SFT: trainer.SFTOptions{Adam: adam, MaxGradNorm: 1}}
}

// request publishes sft.requested and waits for its sft.completed.
func request(t *testing.T, l *engine.Log, key string, p schemas.SFTRequestedPayload) schemas.SFTCompletedPayload {
	t.Helper()
	ev, err := engine.NewRootEvent(run, schemas.SFTRequested, key, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	testinfra.CheckFor(t, time.Minute, func() error {
		if n := testinfra.Count(t, l, "t1."+run+"."+schemas.SFTCompleted); n != 1 {
			return fmt.Errorf("%d sft.completed (failed: %d)", n, testinfra.Count(t, l, "t1."+run+".*.failed"))
		}
		return nil
	})
	var done schemas.SFTCompletedPayload
	if err := testinfra.Events(t, l, "t1."+run+"."+schemas.SFTCompleted)[0].Decode(&done); err != nil {
		t.Fatal(err)
	}
	return done
}

// A reference solution replayed through the harness becomes SFT data; the
// stage lowers the policy's loss on it and stores version 1.
func TestSFTOnReferenceSolutions(t *testing.T) {
	ctx := context.Background()
	st, l := testinfra.Store(t), testinfra.Log(t)
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	rows, ref := demonstrations(t, st, tok)
	m, err := moe.NewModel(moe.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	// The initial loss: one step at learning rate 0 measures without moving.
	probe := m.Clone()
	var seqs [][]int
	var masks [][]float32
	for _, r := range rows {
		ids := make([]int, len(r.TokenIDs))
		for i, id := range r.TokenIDs {
			ids[i] = int(id)
		}
		mask := make([]float32, len(ids)-1)
		for i := range mask {
			if r.LossMask[i+1] {
				mask[i] = 1
			}
		}
		seqs, masks = append(seqs, ids), append(masks, mask)
	}
	before, err := trainer.SFTStep(probe, moe.NewAdam(probe, moe.AdamConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}), seqs, masks, 0)
	if err != nil {
		t.Fatal(err)
	}

	initial := func(context.Context) (*moe.Checkpoint, error) {
		return &moe.Checkpoint{Model: m.Clone(), Tokenizer: tok}, nil
	}
	testinfra.RunStage(t, l, New(Config{Store: st, Trainer: trainer.NewReference(st, sftOptions()), Initial: initial}), runnerCfg)
	done := request(t, l, "0", schemas.SFTRequestedPayload{PolicyVersion: 0, Data: []schemas.FileRef{ref}, Epochs: 6})
	t.Logf("SFT loss %.3f → %.3f", before, done.Loss)
	if done.PolicyVersion != 1 || done.Checkpoint.Key != keys.Policy(run, 1) || !(done.Loss < before) {
		t.Fatalf("sft.completed %+v (loss before %.3f)", done, before)
	}
	ck, err := checkpoint.Load(ctx, st, done.Checkpoint.Key)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Meta["policy_version"] != "1" || ck.Meta["sft_from"] != "0" || ck.Optimizer != nil {
		t.Fatalf("checkpoint meta %v, optimizer %v", ck.Meta, ck.Optimizer != nil)
	}

	// No loss tokens at all: the request fails with the reason.
	for i := range rows {
		rows[i].LossMask = make([]bool, len(rows[i].TokenIDs))
	}
	empty, err := schemas.WriteTable(ctx, st, run, 0, rows, schemas.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := engine.NewRootEvent(run, schemas.SFTRequested, "1", schemas.SFTRequestedPayload{PolicyVersion: 1, Data: []schemas.FileRef{empty}, Epochs: 1})
	if _, err := l.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	testinfra.CheckFor(t, time.Minute, func() error {
		if n := testinfra.Count(t, l, "t1."+run+"."+engine.FailedType(schemas.SFTRequested)); n != 1 {
			return fmt.Errorf("%d sft.requested.failed", n)
		}
		return nil
	})
}

// An external trainer fine-tunes the policy through the stage: the
// stand-in does what the reference backend does, through the exec
// protocol, and sft.completed announces the same checkpoint and loss.
func TestExecTrainerFineTunes(t *testing.T) {
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	var got []schemas.SFTCompletedPayload
	for _, name := range []string{"reference", "exec"} {
		t.Run(name, func(t *testing.T) {
			st, l := testinfra.Store(t), testinfra.Log(t)
			_, ref := demonstrations(t, st, tok)
			var tr trainer.Trainer = trainer.NewReference(st, sftOptions())
			if name == "exec" {
				tr = &trainer.Exec{Argv: testinfra.ExecTrainer(t), Hyperparameters: sftOptions()}
			}
			initial := func(context.Context) (*moe.Checkpoint, error) {
				m, err := moe.NewModel(moe.DefaultConfig())
				return &moe.Checkpoint{Model: m, Tokenizer: tok}, err
			}
			testinfra.RunStage(t, l, New(Config{Store: st, Trainer: tr, Initial: initial}), runnerCfg)
			got = append(got, request(t, l, "0", schemas.SFTRequestedPayload{PolicyVersion: 0, Data: []schemas.FileRef{ref}, Epochs: 2}))
		})
	}
	if len(got) != 2 {
		return // a subtest failed
	}
	if got[0] != got[1] || got[0].PolicyVersion != 1 {
		t.Fatalf("reference and exec trainers announced\n%+v\n%+v", got[0], got[1])
	}
}
