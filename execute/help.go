package execute

// RunHelp is what `t1 run` says of itself.
const RunHelp = `Runs every stage in this process — control, synth, audit, rollout, reward, critic, ppo and
eval — on embedded NATS and S3 unless the configuration points elsewhere, sampling from the
configured engine (inference.backend: the in-process reference MoE, or an SGLang or vLLM
server, which must answer at inference.url before anything starts and is made to load each
new policy version). Progress goes to stderr; a summary and the report's path go to stdout.
Interrupting stops cleanly; running again with the same configuration resumes from the log.
With --no-stages this process runs no stage: it starts the run and follows it to its end while
the stages run elsewhere as ` + "`t1 worker --stage S`" + ` processes on the same NATS and S3 (for
example beside ` + "`t1 infra up`" + ` on the data directory).`

// ReplayHelp is what `t1 replay` says of itself.
const ReplayHelp = `Opens run B as a branch of run R and hands the inputs of stage S in R to the stage as if they
belonged to B; what the stage emits goes into B. For example, re-score every attempt of a run
with a fixed verifier without rolling anything out again:

    t1 replay --stage reward --run main --into main-rescored

B's run.started names its parent and branch point and keeps what R froze (seed, model, iterations,
reward scale, pool); --set reward_scale=2, --set seed=9 or --set iterations=4 change one, and the
branch records and reports the change beside R's value. The stage reads what R's events point at
(bundles, snapshots, checkpoints, manifests) and writes under runs/B/; R is never written to.

Without --continue the stage re-runs every input of R (from --from-seq or --since, else from the
start) and nothing else runs: B's status is "replayed". With --continue the branch is R up to
iteration I (default 0) of stage S and a run of its own from there: S re-runs its inputs of that
iteration (sft: the fine-tuning before the first; eval: the evaluations from iteration I's policy
on), then every stage runs in this process until B completes, on consumers of B's own
(<stage>_<B>), as t1 ablate runs its branches — re-score, retrain and evaluate in the branch:

    t1 replay --stage reward --run main --into main-fixed --continue

S is one of rollout, reward, critic, ppo, sft or eval (without --continue also control, synth or
audit). Replaying into B again with the same options resumes it.`

// DemoHelp is what `t1 demo` says of itself.
const DemoHelp = "A producer writes seeded blobs to the object store with one claim-check event each; a verifier\n" +
	"reads every blob back and checks its hash. It exercises the engine, bus and store alone, with\n" +
	"live progress and a summary. Interrupting stops cleanly; running again resumes."
