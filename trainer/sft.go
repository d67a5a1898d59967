package trainer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/t1pipe/t1/batch"
	"github.com/t1pipe/t1/checkpoint"
	"github.com/t1pipe/t1/moe"
	"github.com/t1pipe/t1/schemas"
)

// TrainSFT reads the token rows of job.Data in (task, attempt, chunk)
// order, loads the policy and runs job.Steps Adam steps (a fresh
// optimiser at Opt.SFT.Adam, its learning rate on Opt.SFT.Schedule) of
// SFTStep on the rows' loss regions, each step on the next
// Opt.SFT.Batch of them (minibatch; each pass over them in an order drawn
// from job.Seed, or in that order when it is 0), and saves the
// result under job.Out without optimiser state, so that PPO starts its
// own.
func (r *Reference) TrainSFT(ctx context.Context, job SFTJob) (*SFTResult, error) {
	if err := distinct(job.Policy, job.Out); err != nil {
		return nil, err
	}
	if job.Steps < 1 {
		return nil, batch.Bad(fmt.Errorf("sft: %d steps", job.Steps))
	}
	var rows []schemas.TokenRow
	if err := batch.ReadRows(ctx, r.Store, job.Data, &rows); err != nil {
		return nil, err
	}
	slices.SortFunc(rows, func(a, b schemas.TokenRow) int {
		return cmp.Or(cmp.Compare(a.TaskID, b.TaskID), cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.Chunk, b.Chunk))
	})
	var seqs [][]int
	var masks [][]float32
	for _, row := range rows {
		if len(row.LossMask) != len(row.TokenIDs) {
			return nil, batch.Bad(fmt.Errorf("tokens of task %s attempt %d chunk %d: %d ids, %d mask entries", row.TaskID, row.Attempt, row.Chunk, len(row.TokenIDs), len(row.LossMask)))
		}
		if len(row.TokenIDs) < 2 {
			continue
		}
		ids := make([]int, len(row.TokenIDs))
		for i, id := range row.TokenIDs {
			ids[i] = int(id)
		}
		// Mask entry t weighs target t+1.
		mask := make([]float32, len(ids)-1)
		has := false
		for t := range mask {
			if row.LossMask[t+1] {
				mask[t], has = 1, true
			}
		}
		if has {
			seqs, masks = append(seqs, ids), append(masks, mask)
		}
	}
	if len(seqs) == 0 {
		return nil, batch.Bad(fmt.Errorf("sft: %d token rows, none with a loss token", len(rows)))
	}
	ck, err := checkpoint.LoadPolicy(ctx, r.Store, job.Policy)
	if err != nil {
		return nil, err
	}
	opt := moe.NewAdam(ck.Model, r.Opt.SFT.Adam)
	met := SFTMetrics{Sequences: len(seqs)}
	order := &passOrder{seed: job.Seed, n: len(seqs)}
	for step := range job.Steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		opt.Cfg.LR = sftLR(r.Opt.SFT, step, job.Steps)
		bs, bm := minibatch(seqs, masks, step, r.Opt.SFT.Batch, order)
		if met.Loss, err = SFTStep(ck.Model, opt, bs, bm, r.Opt.SFT.MaxGradNorm); err != nil {
			return nil, batch.Bad(err)
		}
		if step == 0 {
			met.FirstLoss = met.Loss
		}
		met.Steps++
	}
	out := &moe.Checkpoint{Model: ck.Model, Tokenizer: ck.Tokenizer, Meta: map[string]string{
		"policy_version": strconv.FormatInt(job.Version, 10), "sft_from": strconv.FormatInt(job.Version-1, 10)}}
	if err := out.Save(ctx, r.Store, job.Out); err != nil {
		return nil, fmt.Errorf("sft checkpoint: %w", err)
	}
	return &SFTResult{Checkpoint: job.Out, Metrics: met}, nil
}

// sftLR is the learning rate of step k of n under o's schedule.
func sftLR(o SFTOptions, k, n int) float64 {
	if o.Schedule == ScheduleCosine {
		return o.Adam.LR * 0.5 * (1 + math.Cos(math.Pi*float64(k)/float64(n)))
	}
	return o.Adam.LR
}

// SFTStep runs one supervised step over a batch: loss = −Σ mask·logp / N
// over every sequence's targets (N = Σ mask), i.e. ∂L/∂logp = −mask/N.
// masks[i][t] weighs target t+1 of seqs[i] (nil: all targets, weight 1).
// It clips the gradient norm to maxNorm (0: none), steps opt, clears the
// gradients and returns the mean loss before the update.
func SFTStep(m *moe.Model, opt *moe.Adam, seqs [][]int, masks [][]float32, maxNorm float64) (float64, error) {
	var n float64
	for i, s := range seqs {
		if len(s) < 2 {
			return 0, fmt.Errorf("sft: sequence %d has %d tokens, need 2", i, len(s))
		}
		if masks != nil && masks[i] != nil {
			if len(masks[i]) != len(s)-1 {
				return 0, fmt.Errorf("sft: sequence %d: mask of %d for %d targets", i, len(masks[i]), len(s)-1)
			}
			for _, w := range masks[i] {
				n += float64(w)
			}
		} else {
			n += float64(len(s) - 1)
		}
	}
	if n == 0 {
		return 0, errors.New("sft: every mask is zero")
	}
	var loss float64
	for i, s := range seqs {
		p, err := m.Forward(s, moe.ForwardOptions{})
		if err != nil {
			return 0, fmt.Errorf("sft: sequence %d: %w", i, err)
		}
		d := make([]float32, len(s)-1)
		for t := range d {
			w := float32(1)
			if masks != nil && masks[i] != nil {
				w = masks[i][t]
			}
			d[t] = -w / float32(n)
			loss -= float64(w) * float64(p.LogProbs[t]) / n
		}
		if err := m.Backward(p, d, nil); err != nil {
			return 0, err
		}
	}
	opt.Update(maxNorm)
	return loss, nil
}

// minibatch returns the demonstrations of step k: size of them, starting
// where step k−1 stopped in order's stream and wrapping around into the
// next pass, so every demonstration is used equally.
func minibatch(seqs [][]int, masks [][]float32, k, size int, order *passOrder) ([][]int, [][]float32) {
	n := len(seqs)
	if size <= 0 || size >= n {
		return seqs, masks
	}
	bs, bm := make([][]int, size), make([][]float32, size)
	for i := range size {
		j := order.at(k*size + i)
		bs[i], bm[i] = seqs[j], masks[j]
	}
	return bs, bm
}

// passOrder is the order demonstrations are taken in: position j of the
// stream is in pass j/n, and each pass is a permutation of the n
// demonstrations drawn from seed and the pass's index, so a rerun or a
// replay trains identically and runs of other seeds see the same
// demonstrations in other orders. Seed 0 takes them in sorted order on
// every pass. Positions are asked for in increasing order.
type passOrder struct {
	seed uint64
	n    int
	pass int
	perm []int
}

func (o *passOrder) at(j int) int {
	if o.seed == 0 {
		return j % o.n
	}
	if p := j / o.n; o.perm == nil || p != o.pass {
		o.pass, o.perm = p, rand.New(rand.NewPCG(o.seed, uint64(p))).Perm(o.n)
	}
	return o.perm[j%o.n]
}
