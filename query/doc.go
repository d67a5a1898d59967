// Package query reads a run's Parquet tables as `t1 query` prints them:
// every object of a table under runs/<run>/<table>/ (schemas.TableObjects:
// each row once, compacted or not), with the columns and types its files
// hold (a partition directory adds no column, as it adds none in DuckDB,
// pyarrow or polars), rows kept by a --where expression and columns by
// --select, ordered by run, iteration, task, attempt and chunk, and
// written as a table, CSV, JSON (one array), NDJSON or an Arrow IPC
// stream. A table, column or format that does not exist is a usage error
// (exit 2) naming those that do.
//
// ReadPage is the same read for a viewer (t1 ui): one page of rows
// (Offset, Limit) in an order of its choosing (Order, the table's order
// breaking ties) with the total that matched, reading only the columns it
// returns, filters or orders by, optionally only one partition's objects,
// and, with Tolerate, reading on past an object that does not read, which
// it names in Page.Damaged. ReadAttempts pages the attempts view: each
// trajectories row with its rewards row's reward, passed and total, which
// a --where expression, an order and a page apply to alike.
//
// Objects an older minor version of the schema wrote read with the
// columns added since as nulls, so a run that a newer build resumed reads
// as one table.
//
// # The --where grammar
//
//	expr    = or
//	or      = and { OR and }
//	and     = unary { AND unary }
//	unary   = NOT unary | "(" expr ")" | column op literal
//	op      = "=" | "==" | "!=" | "<" | "<=" | ">" | ">="
//	literal = number | 'string' | "string" | true | false
//	number  = [+-] digits and '.' [ (e|E) [+-] digits ]   (Go's ParseInt, else ParseFloat)
//	column  = (letter | "_") { letter | digit | "_" | "." }
//
// Keywords (AND, OR, NOT, TRUE, FALSE) are case-insensitive and cannot
// name a column; a quote inside a string is doubled, as in SQL. A
// comparison is evaluated with Arrow's compute kernels over whole
// columns: integers compare as int64 (uint64 for an unsigned column and
// a non-negative literal), other numbers as float64, strings as UTF-8
// and booleans as booleans; a null compares as null and keeps no row.
//
// The parser is written here rather than taken from an expression
// library (expr-lang/expr, cel-go) because the grammar is this small and
// its evaluation is Arrow's, over columns: a library would bring a type
// system of its own and evaluate row by row. FuzzWhere holds it to never
// panicking and to printing what it parses so that it parses again to
// the same expression.
package query
