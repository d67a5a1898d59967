// Package columnar reads t1's Parquet objects (package schemas) as Arrow
// tables and record batches, with arrow-go's parallel column readers: the
// view `t1 query`, the report and the viewer compute on. Table and
// Records decode a fetched object after a page-CRC pass (parquet-go)
// when no SHA-256 vouched for its bytes, since arrow-go checks none;
// damage is an error naming the object, never a crash or data. Conformed
// reads an object of an older minor version as the table this build
// writes, the columns added since as nulls, and Schema is that table's
// Arrow schema.
//
// It is a package of its own, apart from schemas, because arrow-go brings
// some hundred and fifty packages (its compute kernels, and gRPC through
// pqarrow's Flight schema encoding) that the stages, which write and read
// rows with parquet-go, never use.
package columnar
