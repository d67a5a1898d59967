// Package query reads a run's Parquet tables as `t1 query` prints them:
// every object of a table under runs/<run>/<table>/ (schemas.TableObjects:
// each row once, compacted or not), with the columns and types its files
// hold (a partition directory adds no column, as it adds none in DuckDB,
// pyarrow or polars), rows kept by a --where expression and columns by
// --select, written as a table, CSV, JSON lines or an Arrow IPC stream.
//
// Objects an older minor version of the schema wrote read with the
// columns added since as nulls, so a run that a newer build resumed reads
// as one table. The --where grammar is Expr's.
package query
