// Package execute runs a run to its end in this process, as `t1 run`,
// `t1 replay --continue`, `t1 ablate` and `t1 demo` do, and says how it
// ended.
//
// Where its stages run is the caller's choice (Stages): elsewhere, in
// t1 worker processes; here, on the log's consumers of every run, which
// workers may share; or here for this run alone, on consumers of its own
// (<stage>_<run>), so that runs of several configurations can share a
// process. Control and eval, single per run, run under the run's leases
// (engine.HoldStageLeases).
//
// Whether to start or resume is decided from the log: a run with a
// run.started goes on from what the log holds, unless a configuration of
// another hash started it, which is refused; a run without one is
// started; a run that completed or failed runs no stage at all, and its
// summary and report are made again from the log. Progress is a line per
// change of phase and every few seconds on a log, a live line on a
// terminal; the loop rides out a log it cannot read for a while
// (pollGrace), as the stages do. A run ends with its report written
// (SaveReport) and its Summary.
package execute
