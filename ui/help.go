package ui

// Help is the long help of `t1 ui`.
const Help = `Serves a web viewer of the runs in the configured log and store (embedded or external, as
t1 query and t1 report read them) and prints its URL. It only reads. Pages: the runs; a run's
status, lineage, base -> SFT -> RL table, training curves and iterations; its attempts (sort by a
column, filter with t1 query --where expressions, 100 a page); one attempt's conversation,
verifier assertions and tokens coloured by log-prob or advantage; its routing; and one task's
attempts under two policy versions side by side. A page of a run in progress updates itself as
events arrive. It listens on loopback (127.0.0.1:7117) unless --addr says otherwise: the pages
have no login, so anything that can reach the address can read the run. A run that does not
exist exits 2 naming those that do.`
