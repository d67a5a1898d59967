// Package rollout is the rollout stage: for each rollout.requested it
// plays one episode of the task with the agent harness (package agent) in
// a fresh sandbox, snapshots the final state, stores the attempt's token,
// routing, turn and trajectory rows, and emits rollout.completed.
//
//	rollout.requested ─▶ rollout ─▶ rollout.completed
//
// Purpose sft replays the task's reference solution through the same
// harness (agent.FromSolution), so a demonstration's tokens are exactly
// what the policy sees. Its commands get the task's [agent] timeout_sec
// (agent.Config.ForSolution), as `t1 tasks check` gives solve.sh, not the
// harness's per-command default; a replay that was cut short anyway (a
// command interrupted by its limit, an episode ended before the
// solution's last turn: agent.Result.CutShort) fails permanently, so no
// demonstration of half a solution is trained on. An attempt marker (keys.AttemptMarker), written
// once the outputs are all stored, makes a redelivered request announce
// the stored attempt again rather than play a second episode.
package rollout
