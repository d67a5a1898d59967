// Package agent is the harness a policy works a task through: a
// Terminus-style loop of replies and shell commands in one persistent
// sandbox shell, with the exact token stream of every episode kept for
// training.
//
//	Run         the episode loop: sample a reply, run its commands, observe,
//	            until <task_complete/> or a bound (turns, sampled tokens,
//	            wall clock, context); compaction before the context fills
//	ParseReply  the reply format: <command>…</command> (timeout="SECONDS"),
//	            <task_complete/>; an unusable reply earns a corrective
//	            observation, never an error of the episode
//	Assembler   TITO: the sampler's own ids and log-probs, extended turn by
//	            turn; the drift between the held ids and a fresh rendering is
//	            repaired at each turn boundary (strict prefix, clipped
//	            normalisation, text retokenisation, new chunk) and counted;
//	            loss-region ids never change
//	Scripted    fixed replies (FromSolution: a reference solution parsed
//	            as bash, one top-level statement per turn, its source text
//	            byte for byte; a script that is not bash is an error), for
//	            demonstrations and tests
//	AttemptRows a finished episode as its rows of the tokens, routing,
//	            turns and trajectories tables
//
// Conversations are rendered by the reference model's chat template,
// moe.Chat, in which content is always ordinary text: an instruction or a
// command's output that spells a special token cannot forge a turn. The
// rollout stage (stages/rollout) plays episodes with this package and
// stores their AttemptRows; t1 rollout plays one from the command line.
package agent
