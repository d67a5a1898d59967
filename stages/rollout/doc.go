// Package rollout is the rollout stage: for each rollout.requested it
// plays one episode of the task with the agent harness (package agent) in
// a fresh sandbox, snapshots the final state, stores the attempt's token,
// routing, turn and trajectory rows, and emits rollout.completed.
//
//	rollout.requested ─▶ rollout ─▶ rollout.completed
//
// Purpose sft replays the task's reference solution through the same
// harness (agent.FromSolution), so a demonstration's tokens are exactly
// what the policy sees. An attempt marker (keys.AttemptMarker), written
// once the outputs are all stored, makes a redelivered request announce
// the stored attempt again rather than play a second episode.
package rollout
