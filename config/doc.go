// Package config loads pipeline.yaml, the one file that configures a t1
// pipeline: run identity, data directory, bus, object store, telemetry,
// engine settings and per-stage settings.
//
// Default holds the built-in configuration, so a pipeline runs with no file
// at all; a file only needs the keys it changes. pipeline.yaml at the
// repository root spells out every default, and Config.YAML (t1 config
// defaults) prints them.
//
// The engine: section is engine.Settings, declared beside the runner that
// uses it. The stages: section is not declared here either. Each stage declares its
// settings beside its code, in the idiom of package check: a Settings type
// with yaml tags, DefaultSettings and Check (control, synth, eval, reward,
// audit and demo in their stages/ packages, rollout's episode bounds in
// agent). Stages holds those types, so their defaults are the defaults
// here, and mounts each stage's checks under stages.<stage>. Their Go
// field names and order are part of the configuration hash that feeds
// event ids (pipeline.ConfigHash). Decoding is strict: an
// unknown key, a value of the wrong type, a duration that does not parse or
// an invalid combination is an error that names the file, line and column
// and the key path, one line per problem, suggesting the intended key for a
// misspelt one:
//
//	pipeline.yaml:7:1: unknown key "sotre" (did you mean "store"?)
//	pipeline.yaml:12:18: engine.ack_wait: want a duration such as "30s" or "10m", got "30x"
//
// Durations use Go syntax ("500ms", "10m", "1h30m"). Secrets stay out of the
// file: the NATS password is read from the environment variable named by
// bus.external.password_env, and S3 credentials from AWS_*. The loader itself
// reads no environment; flags and variables that override a field (such as
// --data and T1_DATA) are applied by the runner, which then calls Validate.
//
// Variants and setups vary a file's configuration by dotted keys
// (training.replay, stages.control.sft_steps, …). A variant
// (Config.Variant) is an ablation of the file's run, run by t1 ablate as
// <run.id>-<name>; it may not change run.id, data, bus or store. A setup
// (Config.Setup, selected with t1 --setup NAME by every command) is another
// configuration kept in the same file: the file's keys with the setup's set
// over them, a run.id of its own (required), and the setup's own variants
// in place of the file's. So one file holds a reproduction's
// configurations that differ in many keys, each with its ablations:
//
//	setups:
//	  - name: rename
//	    set: {run.id: t1-rename, stages.synth.library: basic-rename, stages.eval.attempts: 2}
//	    variants:
//	      - {name: avoid, set: {stages.synth.avoid_eval: true}}
//
// Parse validates every setup and every setup's variant, placing a problem
// at the setup's line; an unknown setup name is an error listing the
// configured ones.
//
// Relative paths (data, stages.eval.dirs, an inference.checkpoint that is a
// local directory, training.trainer.dir) are relative to the directory t1
// was started in; pipeline.WithWorkDir carries it past the embedded S3
// gateway, which moves the process's working directory to its store root.
package config
