// Package taskgen grows terminal tasks by recursive synthesis.
//
// A task is a fold over a list of steps (StepRef: a step name, a seed and
// the artifact it consumes). Each step is a small, typed, executable piece
// of work from a library spanning file operations, text processing, CSV and
// JSON data, archives, permissions, scripting, debugging and git. A step
// contributes, in this order:
//
//	preconditions   files the environment must hold (setup.sh writes them)
//	solution        shell lines of the reference solution
//	assertions      verifier checks, one pytest function each
//	phrase          the sentence of the instruction that asks for its work
//
// and produces artifacts that later steps consume, so an extension of a
// task depends on what its solution already made.
//
//	round r:  seed task  [s1 s2]            accepted, audited
//	          child      [s1 s2 | s3 s4]    s3 consumes an artifact of s2,
//	                                        s4 one of s3 (or a new source)
//
// Difficulty goes into the executable path first: Build folds the steps
// into environment, solution and verifier, and only then composes the
// instruction from the steps' phrases, so a longer task always means more
// work, never a longer prompt for the same work. Whether a child is kept is
// decided by execution (the oracle passes every assertion, the parent's
// solution fails the new ones), not here.
//
// Everything is a pure function of the step list: the same refs give
// byte-identical task files, so lineage (parent, round, steps) is enough to
// rebuild any task.
package taskgen
