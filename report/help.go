package report

// RunsHelp is what `t1 runs` says of itself.
const RunsHelp = `Lists the runs the event log holds, sorted by id. A branch (t1 replay) names its parent and
where it left it: the stage it re-ran, and for a continued branch the iteration it went on from.
Status is completed, failed, running, replayed (a branch that re-ran one stage and nothing
after it) or unstarted (events without run.started). Iterations counts the policy updates of the
run's own, of those its run.started planned; policy versions are those the run made itself.`

// Help is what `t1 report` says of itself.
const Help = `Reads the run's events and its metrics, trajectories, rewards and eval_results tables and
writes report.md and report.html under <data>/runs/R/ (or --out DIR), and stores both as the
objects runs/R/report.md and runs/R/report.html. The HTML page needs nothing else: open it in
a browser. Runs named with --compare are shown beside R as variants (ablations): a comparison
table, and their per-iteration lines overlaid on R's. Works beside a running ` + "`t1 run`" + ` or
` + "`t1 infra up`" + ` on the same data directory; a run in progress is reported as running.`

// PoolHelp is what `t1 pool show` says of itself.
const PoolHelp = `Reads the run's pool.sealed event (the latest version unless --version is given) and the
tasks-table rows it claims, and prints the pool's size, the accepted tasks sealing dropped as
near-duplicates of another, histograms by category and by difficulty, the share of the pool held by its five
largest categories (1.0 means at most five categories: a narrow pool), and every task.`
