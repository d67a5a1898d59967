package inference

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/t1pipe/t1/internal/testinfra"
	"github.com/t1pipe/t1/keys"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/store"
)

func TestOpenReferenceFromStoreAndDir(t *testing.T) {
	st := testinfra.Store(t)
	tok, err := moe.DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	cfg := moe.DefaultConfig()
	cfg.Context, cfg.Seed = 64, 5
	m, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ck := &moe.Checkpoint{Model: m, Tokenizer: tok, Meta: map[string]string{"policy_version": "12"}}
	if err := ck.Save(context.Background(), st, keys.Policy("r1", 12)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ck.SaveDir(dir); err != nil {
		t.Fatal(err)
	}
	req := GenerateRequest{InputIDs: tok.Encode("<|user|>ls<|end|>"), SamplingParams: SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 10, Seed: 2}, ReturnLogprob: true}
	want, err := NewReference(m, tok, moe.BF16, "12").Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{keys.Policy("r1", 12), dir} {
		eng, err := Open(context.Background(), Options{Backend: BackendReference, Checkpoint: ref, Precision: "bf16", Model: moe.DefaultConfig()}, st)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		got, err := eng.Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got.WeightVersion != "12" || !slices.Equal(got.OutputIDs, want.OutputIDs) || !slices.Equal(got.OutputTokenLogprobs, want.OutputTokenLogprobs) {
			t.Fatalf("%s: served %v (version %s), want %v", ref, got.OutputIDs, got.WeightVersion, want.OutputIDs)
		}
	}
	// A fresh model when no checkpoint is named; the version override wins.
	ref, err := OpenReference(context.Background(), Options{Precision: "f32", Model: cfg, Version: "boot"}, nil)
	if err != nil || ref.WeightVersion() != "boot" || ref.Precision() != moe.F32 {
		t.Fatalf("fresh: %v", err)
	}
	for _, c := range []struct {
		o    Options
		st   store.ObjectStore
		want string
	}{
		{Options{Backend: BackendReference, Checkpoint: "runs/none", Precision: "bf16"}, st, "runs/none"},
		{Options{Backend: BackendReference, Checkpoint: "runs/none", Precision: "bf16"}, nil, "no object store"},
		{Options{Backend: BackendReference, Precision: "fp8"}, nil, "fp8"},
		{Options{Backend: "tgi"}, nil, "tgi"},
		{Options{Backend: BackendSGLang}, nil, "url"},
		{Options{Backend: BackendVLLM, URL: "gpu:8000"}, nil, "http://"},
	} {
		if _, err := Open(context.Background(), c.o, c.st); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error mentioning %q", c.o, err, c.want)
		}
	}
}

// TestUpdateWeightsFromDisk swaps the served weights over HTTP, as an RL
// loop does after each policy update.
func TestUpdateWeightsFromDisk(t *testing.T) {
	st := testinfra.Store(t)
	ref, tok := testReference(t)
	srv := NewServer(ref, "initial", nil)
	srv.EnableWeightUpdates(func(ctx context.Context, path string) (*moe.Checkpoint, error) {
		return LoadCheckpoint(ctx, path, moe.Config{}, st)
	})
	url := serveHandler(t, srv)
	cl, err := NewSGLang(SGLangOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := ref.Config()
	cfg.Seed = 77
	m2, err := moe.NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := (&moe.Checkpoint{Model: m2, Tokenizer: tok}).Save(context.Background(), st, keys.Policy("r", 9)); err != nil {
		t.Fatal(err)
	}
	if err := cl.UpdateWeightsFromDisk(context.Background(), keys.Policy("r", 9), "9"); err != nil {
		t.Fatal(err)
	}
	req := GenerateRequest{InputIDs: tok.Encode("<|user|>ls<|end|>"), SamplingParams: SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 12, Seed: 1}, ReturnLogprob: true}
	got, err := cl.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewReference(m2, tok, moe.BF16, "9").Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got.WeightVersion != "9" || !slices.Equal(got.OutputTokenLogprobs, want.OutputTokenLogprobs) {
		t.Fatalf("after update: version %s", got.WeightVersion)
	}
	if err := cl.UpdateWeightsFromDisk(context.Background(), keys.Policy("r", 10), "10"); err == nil || !strings.Contains(err.Error(), keys.Policy("r", 10)) {
		t.Fatalf("missing checkpoint: %v", err)
	}
	if ref.WeightVersion() != "9" {
		t.Fatal("a failed update changed the weights")
	}
}
