"""Reads t1's Parquet files with the Arrow tools researchers use.

For each file named on the command line, pyarrow, polars and DuckDB each
read every row; the result, one JSON object on stdout, maps each file to
each tool's column names and rows. Binary values are written as hex and
floats with repr, so that the Go side compares exact values.
"""

import json
import sys

import duckdb
import polars
import pyarrow.parquet


def plain(v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"hex": bytes(v).hex()}
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def read(path):
    out = {}
    t = pyarrow.parquet.read_table(path)
    out["pyarrow"] = {"columns": t.column_names, "rows": t.to_pylist()}
    df = polars.read_parquet(path)
    out["polars"] = {"columns": df.columns, "rows": df.to_dicts()}
    rel = duckdb.read_parquet(path)
    cols = rel.columns
    out["duckdb"] = {"columns": cols, "rows": [dict(zip(cols, r)) for r in rel.fetchall()]}
    return {tool: {"columns": r["columns"], "rows": plain(r["rows"])} for tool, r in out.items()}


def main():
    json.dump({p: read(p) for p in sys.argv[1:]}, sys.stdout)


if __name__ == "__main__":
    main()
