// Package agent is the harness a policy works a task through: a
// Terminus-style loop of replies and shell commands in one persistent
// sandbox shell, with the exact token stream of every episode kept for
// training.
//
//	Run         the episode loop: sample a reply, run its commands, observe,
//	            until <task_complete/> or a bound (turns, sampled tokens,
//	            wall clock, context); compaction before the context fills
//	Chat        a model's chat rendering: OwnChat (t1's template, message by
//	            message) or Template (a model's Jinja chat_template on its
//	            Hugging Face tokenizer, control tokens only where the
//	            template wrote them); Config.Chat picks one per model
//	Format      the action format: tags (ParseReply: <command>…</command>,
//	            timeout="SECONDS", <task_complete/>), Terminus-2's JSON
//	            (completion confirmed twice), native tool calls to a bash
//	            tool; an unusable reply earns a corrective observation,
//	            counted, never an error of the episode
//	Assembler   TITO: the sampler's own ids and log-probs, extended turn by
//	            turn; the drift between the held ids and a fresh rendering is
//	            repaired at each turn boundary (strict prefix, clipped
//	            normalisation, text retokenisation, new chunk) and counted;
//	            loss-region ids never change (ARCHITECTURE.md §1.3)
//	Scripted    fixed replies (FromSolution: a reference solution parsed
//	            as bash, one top-level statement per turn, its source text
//	            byte for byte; a script that is not bash is an error), for
//	            demonstrations and tests; Config.ForSolution gives its
//	            commands the task's time limit, Result.CutShort says when a
//	            replay did not run whole (Result.Interrupted commands)
//	AttemptRows a finished episode as its rows of the tokens, routing,
//	            turns and trajectories tables
//
// In either rendering, the text of a system, user or tool message is
// ordinary text: an instruction or a command's output that spells a
// special token cannot forge a turn. Compaction is mechanical (a summary
// of the commands run) or the policy's own summary, a turn of its own. The
// rollout stage (stages/rollout) plays episodes with this package and
// stores their AttemptRows; t1 rollout plays one from the command line.
package agent
