// Package audit scores a task on eight dimensions, folds them into four
// facets with fixed weights, and applies the hard rejects.
//
//	facet        weight  dimensions
//	verifier      45%    correctness  the reference solution passes every assertion
//	                     strength     assertions fail on the untouched environment
//	solution      25%    validity     the solution exits 0 in time, the same in a second sandbox
//	                     integrity    it does not touch the verifier or hard-code its outputs
//	instruction   20%    completeness every path the verifier reads is named
//	                     clarity      sensible length, names its outputs, no test content
//	value         10%    difficulty   work in the solution and assertions to satisfy
//	                     novelty      distance from the reference suites (eval tasks)
//
// Hard rejects, whatever the score: a hidden requirement (the verifier
// reads a path the instruction never names), test leakage (the agent can
// see test content), solution gaming (the reference solution reaches for
// the verifier or writes its expected literals), a verifier too weak to
// tell the untouched environment from a solved one, and a reference
// solution that does not pass.
//
// The null run sees what the sandbox sees, and the sandbox binds the
// host's /usr, /etc and /var read-only: a verifier that checks for a tool
// the task should build (which jq, import numpy) passes its null run when
// the host has that tool, so such an assertion scores as weak here, and
// is rejected only if it tips the null run over half. The converse is not
// caught: audited on a host without the tool, the task rewards doing
// nothing on one that has it. Audit and reward should run on hosts with
// the same packages (the same image); nothing checks that they do.
//
// Audit is pure: the stage runs the executions (oracle, a rerun, a null
// run with no solution) in fresh sandboxes and hands the results in as
// Evidence, so the same evidence always gives the same verdict.
package audit
