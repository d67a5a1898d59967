package moe

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// GapStats compares the serving path with one training forward.
type GapStats struct {
	// Mismatches counts (token, layer) pairs whose expert set differs
	// between the served routing and the routing the trainer used, over
	// Sets pairs (every processed token of every sequence).
	Mismatches int     `json:"mismatches"`
	Sets       int     `json:"sets"`
	Fraction   float64 `json:"fraction"`
	// MeanAbsLogProbGap is the mean |served − trained| log-prob over the
	// generated tokens.
	MeanAbsLogProbGap float64 `json:"mean_abs_logprob_gap"`
	MaxAbsLogProbGap  float64 `json:"max_abs_logprob_gap"`
}

// GapReport is the train-vs-inference mismatch with routing replay off
// (the trainer routes live) and on (it replays the served routing, R³).
type GapReport struct {
	Serving   string   `json:"serving_precision"`
	Training  string   `json:"training_precision"`
	Sequences int      `json:"sequences"`
	Generated int      `json:"generated_tokens"`
	ReplayOff GapStats `json:"replay_off"`
	ReplayOn  GapStats `json:"replay_on"`
}

// MeasureGap samples one generation per prompt with sp at precision
// serving (sp.Temperature and sp.TopP should be 1, so that the served
// log-probs are the model's), then scores each sequence with the float32
// trainer, routing live and replayed.
func MeasureGap(ctx context.Context, m *Model, serving Precision, prompts [][]int, sp SamplingParams) (GapReport, error) {
	s := NewSampler(m, serving)
	rep := GapReport{Serving: serving.String(), Training: F32.String()}
	var sumOff, sumOn float64
	for i, prompt := range prompts {
		q := sp
		q.Seed = sp.Seed + uint64(i)
		g, err := s.Generate(ctx, prompt, q)
		if err != nil {
			return rep, fmt.Errorf("gap: prompt %d: %w", i, err)
		}
		if len(g.OutputIDs) == 0 {
			continue
		}
		seq := append(slices.Clone(prompt), g.OutputIDs...)
		for _, mode := range []struct {
			opt ForwardOptions
			st  *GapStats
			sum *float64
		}{{ForwardOptions{}, &rep.ReplayOff, &sumOff}, {ForwardOptions{Replay: &g.Routing}, &rep.ReplayOn, &sumOn}} {
			p, err := m.Forward(seq, mode.opt)
			if err != nil {
				return rep, fmt.Errorf("gap: prompt %d: %w", i, err)
			}
			mm, n := CompareRouting(g.Routing, p.Routing)
			mode.st.Mismatches += mm
			mode.st.Sets += n
			for j, lp := range g.LogProbs {
				d := math.Abs(float64(lp) - float64(p.LogProbs[len(prompt)-1+j]))
				*mode.sum += d
				mode.st.MaxAbsLogProbGap = max(mode.st.MaxAbsLogProbGap, d)
			}
		}
		rep.Sequences++
		rep.Generated += len(g.OutputIDs)
	}
	for _, x := range []struct {
		st  *GapStats
		sum float64
	}{{&rep.ReplayOff, sumOff}, {&rep.ReplayOn, sumOn}} {
		if x.st.Sets > 0 {
			x.st.Fraction = float64(x.st.Mismatches) / float64(x.st.Sets)
		}
		if rep.Generated > 0 {
			x.st.MeanAbsLogProbGap = x.sum / float64(rep.Generated)
		}
	}
	return rep, nil
}
