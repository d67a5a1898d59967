package config

// DefaultsHelp is what `t1 config defaults` says of itself.
const DefaultsHelp = `Prints the built-in configuration, every key with its default value: what a
run uses for each key its pipeline.yaml leaves out. pipeline.yaml at the
repository root spells out the same values with comments.`
