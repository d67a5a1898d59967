package query

// Help is what `t1 query` says of itself.
const Help = `Reads every object of TABLE under runs/RUN/TABLE/ in the store with arrow-go,
keeps the rows matching --where and the columns named by --select. The
hive partition of each object (iter, round or policy) is a column too.
Objects an older minor version of the schema wrote read with the columns
added since as nulls, so a run that a newer build resumed prints as one
table.

--where takes comparisons of a column with a literal (=, !=, <, <=, >, >=),
combined with AND, OR, NOT and parentheses; strings are quoted:
  t1 query rewards --run r1 --where "reward > 0.5 AND NOT fallback"
  t1 query trajectories --run r1 --where "purpose = 'eval' OR turns >= 100" --select task_id,turns

Rows come out ordered by run, iteration (or the partition), task, attempt
and chunk, those of them the table has, so --limit takes the first rows.
A table, column or format that does not exist is a usage error (exit 2)
naming those that do.

--format table clips cells wider than 32 characters with an ellipsis; csv,
json (one array of row objects, the default under --json) and ndjson (one
object a line) keep every value whole, integers beyond 2^53 as strings.
--format arrow writes an Arrow IPC stream to stdout, e.g. for
pyarrow.ipc.open_stream(sys.stdin.buffer).`
