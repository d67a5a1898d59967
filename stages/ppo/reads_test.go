package ppo_test

import (
	"context"
	"testing"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
	"github.com/t1pipe/t1/stages/critic"
	"github.com/t1pipe/t1/stages/ppo"
	"github.com/t1pipe/t1/store/errorstore"
	"github.com/t1pipe/t1/trainer"
)

// Each update stage reads its batch from the store once: the stage loads
// it and hands it to the in-process trainer, and the critic computes the
// values from the batch it loaded rather than from the manifest it
// rewrites. Each stage runs on a store of its own that counts its reads.
func TestEachStageReadsItsBatchOnce(t *testing.T) {
	e := setup(t, "reads")
	criticStore, ppoStore := errorstore.New(e.st), errorstore.New(e.st)
	testinfra.RunStage(t, e.l, critic.New(critic.Config{Store: criticStore, Trainer: trainer.NewReference(criticStore, options()),
		GAE: trainer.GAE{Gamma: 1, Lambda: 0.95}}), runnerCfg)
	initial := func(context.Context) (*moe.Checkpoint, error) {
		return &moe.Checkpoint{Model: e.m.Clone(), Tokenizer: e.tok}, nil
	}
	testinfra.RunStage(t, e.l, ppo.New(ppo.Config{Store: ppoStore, Trainer: trainer.NewReference(ppoStore, options()), Initial: initial}), runnerCfg)
	e.batch(t, 0, 0, rollouts(t, e.run, e.m, e.tok, 0))

	var ready schemas.BatchReadyPayload
	if err := e.wait(t, schemas.BatchReady, 1)[0].Decode(&ready); err != nil {
		t.Fatal(err)
	}
	var cu schemas.CriticUpdatedPayload
	if err := e.wait(t, schemas.CriticUpdated, 1)[0].Decode(&cu); err != nil {
		t.Fatal(err)
	}
	e.wait(t, schemas.PolicyUpdated, 1)

	for _, c := range []struct {
		stage string
		st    *errorstore.Store
		ref   schemas.ObjectRef
	}{{"critic", criticStore, ready.Manifest}, {"ppo", ppoStore, cu.Manifest}} {
		m, err := batch.ReadManifest(context.Background(), e.st, c.ref)
		if err != nil {
			t.Fatal(err)
		}
		reads := map[string]int{}
		for _, call := range c.st.Calls() {
			if call.Op == errorstore.Get || call.Op == errorstore.GetRange {
				reads[call.Key]++
			}
		}
		keys := []string{c.ref.Key}
		for _, refs := range [][]schemas.FileRef{m.TokenFiles, m.RoutingFiles, m.ValueFiles, m.RewardFiles} {
			for _, r := range refs {
				keys = append(keys, r.Key)
			}
		}
		if c.stage == "ppo" && len(m.ValueFiles) == 0 {
			t.Fatal("ppo's manifest lists no values")
		}
		for _, k := range keys {
			if reads[k] != 1 {
				t.Errorf("%s read %s %d times, want once", c.stage, k, reads[k])
			}
		}
	}
}
