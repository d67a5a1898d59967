package trainer

import (
	"fmt"

	"github.com/t1pipe/t1/moe"
)

// WarmUp trains the checkpoint's model for steps supervised steps on
// 128-token windows of the embedded corpus, so that a fresh model, close
// to uniform, routes and samples as a trained one does (t1 moe gap).
func WarmUp(ck *moe.Checkpoint, steps int) error {
	ids := ck.Tokenizer.Encode(moe.Corpus())
	var seqs [][]int
	for i := 0; i+128 <= len(ids) && len(seqs) < 8; i += 128 {
		seqs = append(seqs, ids[i:i+128])
	}
	opt := moe.NewAdam(ck.Model, moe.AdamConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	for i := 0; i < steps; i++ {
		if _, err := SFTStep(ck.Model, opt, seqs, nil, 1); err != nil {
			return fmt.Errorf("sft warm-up: %w", err)
		}
	}
	return nil
}
