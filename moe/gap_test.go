package moe

import (
	"context"
	"testing"
)

func TestMeasureGap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Context = 256
	m, err := NewModel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := DefaultTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	prompts := [][]int{tok.Encode("<|user|>List the files in /tmp.<|end|><|assistant|>"), tok.Encode("<|user|>Run the tests.<|end|><|assistant|>")}
	sp := SamplingParams{Temperature: 1, TopP: 1, MaxNewTokens: 96, Seed: 1}
	bf, err := MeasureGap(context.Background(), m, BF16, prompts, sp)
	if err != nil {
		t.Fatal(err)
	}
	if bf.ReplayOff.Mismatches == 0 || bf.ReplayOff.MeanAbsLogProbGap == 0 {
		t.Fatalf("bf16 serving shows no gap: %+v", bf)
	}
	if bf.ReplayOn.Mismatches != 0 {
		t.Fatalf("replay left %d mismatches", bf.ReplayOn.Mismatches)
	}
	f32, err := MeasureGap(context.Background(), m, F32, prompts, sp)
	if err != nil {
		t.Fatal(err)
	}
	if f32.ReplayOff.Mismatches != 0 || f32.ReplayOff.MaxAbsLogProbGap != 0 || f32.ReplayOn.MaxAbsLogProbGap != 0 {
		t.Fatalf("equal precision is not exact: %+v", f32)
	}
	t.Logf("bf16: %+v", bf)
}
