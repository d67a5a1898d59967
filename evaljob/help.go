package evaljob

// Help is what `t1 eval` says of itself.
const Help = `Evaluates policy version N of run R on a suite: the configured one by its name
(stages.eval.suite), or a directory of Harbor tasks (a task, or a dataset root of them).
The job writes eval_results and eval.completed under the run, as the run's own evaluations
do, running the eval, rollout and reward stages in this process for this evaluation alone:
on consumers of its own (<stage>_R_<id>, <id> beginning the id of its eval.requested), which
start at that event and pass over every event of R that does not descend from it (R's
training, its other evaluations); it deletes them once the evaluation has completed or
failed. Where the log has shared consumers of rollout and reward (a t1 run made them), it
works on those instead, beside any workers on them, so that each attempt runs once.

It is idempotent: an evaluation the log already completed for the same run, suite and
version is printed, not redone, and the job exits 0. Interrupted, it resumes where it
stopped when run again. It holds the lease of the eval stage for run R while it works, so it
exits 4 while another process runs eval for R (t1 run of R, t1 eval --run R, t1 worker --stage
eval with --run R or for every run), and runs beside those of other runs. Exit codes: 0 done,
1 the evaluation failed, 2 a bad run, version, suite or attempts, 3 NATS or S3 lost,
4 eval of R runs elsewhere, 5 interrupted.`
