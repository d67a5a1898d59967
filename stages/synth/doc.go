// Package synth is the recursive task-synthesis stage.
//
//	synth.requested ─▶ synth ─▶ synth.candidate × n ─▶ synth ─▶ task.synthesized | synth.discarded
//
// A request fans out into candidates so each runs and retries alone. Round
// 0's candidates are fresh taskgen tasks. Later rounds extend accepted
// tasks with the configured generator:
//
//	builtin  taskgen adds typed, dependent steps to the parent's steps
//	llm      a chat model behind an OpenAI-compatible endpoint rewrites the
//	         parent's files (see Reply for the answer it must give)
//
// Either way a child is kept only by execution (ExecuteTask), each run in a
// fresh sandbox: the reference solution passes every assertion of a
// per-assertion report, the child adds assertions, and the parent's
// solution, run on the child's environment, fails every one of them. A
// kept task gets its lineage (keys.Lineage; the generator that grew it), its
// bundle and a tasks row; a dropped one a synth.discarded with the reason.
//
// The llm generator's failures sort by whose they are. A reply that cannot
// become a task — not the documented JSON, no solution, a path outside the
// task, too large, not UTF-8 — is this candidate's discard. Transport
// errors, timeouts, 5xx, 408 and 429 are retried with back-off, then
// returned as transient errors for the engine to redeliver. Any other 4xx
// fails the candidate permanently, with the status and the server's
// message and never the API key. A reply is stored (keys.SynthReply) before it is
// judged, so a redelivered candidate is judged on the same reply, and the
// request's seed derives from the run seed and the candidate's event id.
package synth
