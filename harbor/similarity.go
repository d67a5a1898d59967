package harbor

import (
	"hash/fnv"
	"slices"
	"strings"
)

// Fingerprint is the sorted set of hashed word 3-shingles of a task's
// instruction and reference solution: what the task asks and what doing
// it takes.
type Fingerprint []uint64

// Reference is a task others must stay apart from (an evaluation suite's),
// by name and fingerprint.
type Reference struct {
	Name  string
	Print Fingerprint
}

// Nearest returns the reference most similar to fp and its similarity
// (0 and "" when there is none): audit rejects a task whose nearest
// reference is above its threshold, and synthesis avoids drawing one.
func Nearest(fp Fingerprint, refs []Reference) (sim float64, name string) {
	for _, r := range refs {
		if s := Similarity(fp, r.Print); s > sim {
			sim, name = s, r.Name
		}
	}
	return sim, name
}

// FingerprintOf fingerprints a task.
func FingerprintOf(t *Task) Fingerprint {
	return FingerprintText(t.Instruction + "\n" + string(t.Files[SolutionPath].Data))
}

// FingerprintText fingerprints free text; case and punctuation are
// ignored so cosmetic edits do not make a task new.
func FingerprintText(s string) Fingerprint {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '/' || r == '.')
	})
	var fp Fingerprint
	for i := 0; i+3 <= len(words) || (i == 0 && len(words) > 0); i++ {
		h := fnv.New64a()
		end := min(i+3, len(words))
		h.Write([]byte(strings.Join(words[i:end], " ")))
		fp = append(fp, h.Sum64())
	}
	slices.Sort(fp)
	return slices.Compact(fp)
}

// Similarity is the Jaccard index of two fingerprints, in [0, 1].
func Similarity(a, b Fingerprint) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	inter, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			inter++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// Dedup returns, for candidates in a fixed order, which ones to keep: a
// candidate is dropped when it is more similar than max to one kept
// before it. The caller fixes the order (by task id, say) so the result
// does not depend on the order in which audits finished.
func Dedup(cands []Fingerprint, max float64) []bool {
	keep := make([]bool, len(cands))
	var kept []Fingerprint
	for i, c := range cands {
		keep[i] = true
		for _, k := range kept {
			if Similarity(c, k) > max {
				keep[i] = false
				break
			}
		}
		if keep[i] {
			kept = append(kept, c)
		}
	}
	return keep
}
