package report

import (
	"fmt"
	"math"
	"strconv"
)

// answerSection opens the report with what the run was for: the base →
// SFT → RL table per suite, each resolve rate with its interval, and each
// step tested on the attempts the two policies share.
func answerSection(r *Run) *section {
	s := &section{id: "answer", title: "Result"}
	rows := Recipe(r)
	if len(rows) == 0 {
		if len(r.Evals) == 0 {
			s.para("No evaluation completed.")
		} else {
			s.para("No evaluation of the base, fine-tuned or RL policy.")
		}
		return s
	}
	t := &table{caption: "base → SFT → RL on the held-out suite",
		head: []string{"suite", "policy", "version", "attempts", "resolve rate", "95% interval", "partial credit", "mean turns", "against the row above"}}
	for i, row := range rows {
		solved := solvedAttempts(r, row.Eval)
		lo, hi := Wilson(solved, row.Attempts)
		step := "–"
		if i > 0 && rows[i-1].Suite == row.Suite {
			step = pairedCell(Pair(row.Suite, r.EvalResults, rows[i-1].PolicyVersion, r.EvalResults, row.PolicyVersion))
		}
		attempts := strconv.Itoa(row.Attempts)
		if row.Unscored > 0 {
			// The rates leave out attempts whose rollout or reward failed.
			attempts += fmt.Sprintf(" (+%d unscored)", row.Unscored)
		}
		t.rows = append(t.rows, []string{row.Suite, row.Label(), fmt.Sprintf("v%d", row.PolicyVersion), attempts,
			fmt.Sprintf("%s (%d/%d)", rate(row.ResolveRate), solved, row.Attempts), "[" + rate(lo) + ", " + rate(hi) + "]",
			num(row.MeanReward), fmt.Sprintf("%.1f", row.MeanTurns), step})
	}
	s.add(t)
	s.para("The interval is Wilson's score interval for a proportion over the scored attempts; a task's attempts are not independent, so it is narrower than one over tasks. " +
		"The last column pairs each attempt with the same task and attempt index under the policy above (the evaluation seeds sampling by task and attempt, whatever the policy): " +
		"attempts solved only by the later policy (+), only by the earlier (−), of those paired, and the exact two-sided McNemar test, a sign test over the attempts that changed. " +
		"A difference of a few attempts with p above 0.05 is within the suite's noise.")
	return s
}

// solvedAttempts counts e's solved attempts from eval_results, or from
// its resolve rate when the rows are not at hand (an ancestor's).
func solvedAttempts(r *Run, e Eval) int {
	n, solved := 0, 0
	for _, x := range r.EvalResults {
		if x.Suite == e.Suite && x.PolicyVersion == e.PolicyVersion {
			n++
			if x.Solved {
				solved++
			}
		}
	}
	if n == e.Attempts && n > 0 {
		return solved
	}
	return int(math.Round(e.ResolveRate * float64(e.Attempts)))
}

func pairedCell(p Paired) string {
	if p.Pairs == 0 {
		return "no attempts in common"
	}
	return fmt.Sprintf("+%d −%d of %d paired, p = %s", p.Improved, p.Worsened, p.Pairs, pValue(p.SignP()))
}

func pValue(p float64) string {
	if p < 0.001 {
		return strconv.FormatFloat(p, 'e', 1, 64)
	}
	return strconv.FormatFloat(p, 'f', 3, 64)
}

// Wilson is the 95% Wilson score interval of k successes in n trials:
// unlike the normal approximation it stays within [0, 1] and is not
// empty at 0 or n successes, where a small suite's rates often lie.
// n = 0 gives [0, 1].
func Wilson(k, n int) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	const z = 1.959963984540054 // the normal's 97.5th percentile
	p, nf := float64(k)/float64(n), float64(n)
	d := 1 + z*z/nf
	c := (p + z*z/(2*nf)) / d
	h := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / d
	return max(0, c-h), min(1, c+h)
}
