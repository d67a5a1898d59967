package report

import "math"

// Paired compares two evaluations of one suite attempt by attempt. The
// evaluation seeds each attempt's sampling by task and attempt index,
// whatever the policy, so the same attempt of two policies differs by
// the policies alone: a step that changes few replies shows in the
// attempts it changed, where the two resolve rates each carry the
// suite's sampling noise.
type Paired struct {
	Pairs    int `json:"pairs"`    // attempts both evaluations scored
	Improved int `json:"improved"` // solved by the later policy and not the earlier
	Worsened int `json:"worsened"` // solved by the earlier policy and not the later
}

// Pair matches the attempts of version va in a with those of version vb
// in b on suite, by task and attempt index. a and b may be one run's
// results, or a branch's and the ancestor's that evaluated for it.
func Pair(suite string, a []EvalResult, va int64, b []EvalResult, vb int64) Paired {
	type key struct {
		task    string
		attempt int
	}
	before := map[key]bool{}
	for _, r := range a {
		if r.Suite == suite && r.PolicyVersion == va {
			before[key{r.TaskID, r.Attempt}] = r.Solved
		}
	}
	var p Paired
	for _, r := range b {
		if r.Suite != suite || r.PolicyVersion != vb {
			continue
		}
		was, ok := before[key{r.TaskID, r.Attempt}]
		if !ok {
			continue
		}
		p.Pairs++
		switch {
		case r.Solved && !was:
			p.Improved++
		case was && !r.Solved:
			p.Worsened++
		}
	}
	return p
}

// Add is p and q pooled, as over seeds.
func (p Paired) Add(q Paired) Paired {
	return Paired{Pairs: p.Pairs + q.Pairs, Improved: p.Improved + q.Improved, Worsened: p.Worsened + q.Worsened}
}

// SignP is the exact two-sided sign test over the attempts that changed:
// the chance of a split at least as uneven as Improved against Worsened
// were each change as likely to go either way. 1 when nothing changed.
func (p Paired) SignP() float64 {
	n := p.Improved + p.Worsened
	if n == 0 {
		return 1
	}
	var tail float64
	for i := range min(p.Improved, p.Worsened) + 1 {
		tail += math.Exp(lchoose(n, i) - float64(n)*math.Ln2)
	}
	return min(1, 2*tail)
}

// lchoose is ln C(n, k).
func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}
