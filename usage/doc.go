// Package usage holds what t1's help shows beyond each command's own
// text: the groups `t1 --help` lists commands under, by what a user does
// with them (run, inspect, query, replay, serve, tasks), an example for
// every command, and the one-line error for a command that does not
// exist, which names the closest ones (exit 2) instead of cobra's
// multi-line suggestion or, for a group such as `t1 events`, its help
// and exit 0.
package usage
