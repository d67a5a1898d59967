package rl

import (
	"fmt"
	"math"
)

// GroupBaseline returns each attempt's reward minus the mean reward of
// the attempts in its group (the attempts of one task in one batch), the
// advantage every action of that attempt gets when the baseline is the
// group rather than a critic. An attempt alone in its group, or a group
// whose attempts all earned the same, gets 0: it says nothing about which
// actions were better. Unlike a critic, the group baseline cannot confuse
// a task worth more assertions with a better attempt.
func GroupBaseline(rewards []float64, groups []string) ([]float64, error) {
	if len(rewards) != len(groups) {
		return nil, fmt.Errorf("group baseline: %d rewards for %d groups", len(rewards), len(groups))
	}
	sum := map[string]float64{}
	n := map[string]int{}
	for i, r := range rewards {
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return nil, fmt.Errorf("group baseline: attempt %d has reward %g", i, r)
		}
		sum[groups[i]] += r
		n[groups[i]]++
	}
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		out[i] = r - sum[groups[i]]/float64(n[groups[i]])
	}
	return out, nil
}

// WeighAttempts scales the advantages of every action in place so that
// each attempt carries the same total weight in a token-level mean over
// the batch: an action of an attempt with n actions is multiplied by
// N/(K·n), for N actions over K attempts. Without it, an attempt that runs
// every turn with long failed replies outweighs a short solved one by its
// length. attempt[i] names the attempt chunk i belongs to.
func WeighAttempts(attempt []int, loss [][]bool, adv [][]float32) error {
	if len(attempt) != len(loss) || len(loss) != len(adv) {
		return fmt.Errorf("weigh attempts: %d attempt ids, %d loss masks, %d advantage slices", len(attempt), len(loss), len(adv))
	}
	actions := map[int]int{}
	total := 0
	for i := range loss {
		if len(loss[i]) != len(adv[i]) {
			return fmt.Errorf("weigh attempts: chunk %d: %d tokens, %d advantages", i, len(loss[i]), len(adv[i]))
		}
		for _, l := range loss[i] {
			if l {
				actions[attempt[i]]++
				total++
			}
		}
	}
	if total == 0 {
		return nil
	}
	k := float64(len(actions))
	for i := range loss {
		n := actions[attempt[i]]
		if n == 0 {
			continue
		}
		w := float32(float64(total) / (k * float64(n)))
		for t, l := range loss[i] {
			if l {
				adv[i][t] *= w
			}
		}
	}
	return nil
}
