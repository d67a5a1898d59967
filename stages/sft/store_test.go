package sft_test

import (
	"context"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/sft"
	"github.com/t1pipe/t1/store/errorstore"
	"github.com/t1pipe/t1/trainer"
)

// The store failing while the demonstrations are read, on opening one or
// in its body, is retried, not bad data.
func TestDataStoreFaults(t *testing.T) {
	st := testinfra.FreshStore(t)
	rows := []schemas.TokenRow{{Run: "sf", TaskID: "t", TokenIDs: []int32{1, 2, 3}, LogProbs: []float32{0, 0, 0},
		LossMask: []bool{false, true, true}, TurnOffsets: []int32{0}, DriftRepair: schemas.RepairNone}}
	ref, err := schemas.WriteTable(context.Background(), st, "sf", 0, rows, schemas.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := testinfra.RootEvent(t, "sf", schemas.SFTRequested, "0", schemas.SFTRequestedPayload{Data: []schemas.FileRef{ref}, Epochs: 1})
	initial := func(context.Context) (*moe.Checkpoint, error) {
		tok, err := moe.DefaultTokenizer()
		if err != nil {
			return nil, err
		}
		m, err := moe.NewModel(moe.DefaultConfig())
		return &moe.Checkpoint{Model: m, Tokenizer: tok}, err
	}
	for _, f := range []errorstore.Fault{{Op: errorstore.Get}, {Op: errorstore.Get, After: true}} {
		es := errorstore.New(st, f)
		testinfra.FailsRetryably(t, sft.New(sft.Config{Store: es, Trainer: trainer.NewReference(es, trainer.ReferenceOptions{}), Initial: initial}), ev)
	}
}
