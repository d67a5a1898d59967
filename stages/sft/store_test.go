package sft_test

import (
	"context"
	"testing"

	"github.com/t1pipe/t1/infra/store/errorstore"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/sft"
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
	for _, f := range []errorstore.Fault{{Op: errorstore.Get}, {Op: errorstore.Get, After: true}} {
		testinfra.FailsRetryably(t, sft.New(sft.Config{Store: errorstore.New(st, f)}), ev)
	}
}
