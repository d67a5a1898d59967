// Package pipeline wires a run's stages from its configuration: the one
// place that turns a config.Config into the control, synth, audit,
// rollout, reward, critic, ppo, sft and (with an evaluation suite) eval
// stages, the run.started payload that opens a run, and the hash that
// identifies the configuration in event ids.
//
// Every command that runs stages (t1 run, worker, ablate, replay) and the
// integration tests build them here, so a stage runs the same wherever it
// runs. Build only constructs: beyond the evaluation suite's task
// directories it reads nothing, and it publishes and stores nothing; the
// stages touch the log and store once a runner feeds them. The same
// configuration builds the same stages, which emit the same events and
// objects.
//
// Pipeline.Branch opens a branch of a run (t1 replay): it publishes the
// branch's run.started, with the parent's frozen settings and the
// overrides asked for, and re-runs one of the built stages over the
// parent's inputs into it; a continued branch re-runs the inputs at its
// branch point (lineage.Cut) and is carried on by the stages' runners.
//
// The stages that fold the log and must handle one event at a time
// (control, eval) say so themselves (engine.Serial); whoever runs them
// needs no list of names.
package pipeline
