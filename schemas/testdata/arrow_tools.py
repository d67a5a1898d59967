"""Reads t1's Parquet files with the Arrow tools researchers use.

With --tables RUN_DIR QUERY_DIR TABLE..., each table's directory under
RUN_DIR is read whole, hive partitioning on, by pyarrow's dataset API,
polars and DuckDB, and QUERY_DIR/<table>.arrow (t1 query's Arrow stream)
by pyarrow; the result maps each table to each reader's column names,
types (string, binary and list kinds of one width) and rows (canonical
JSON, sorted).

Otherwise, for each file named on the command line, pyarrow, polars and DuckDB each
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


def kind(t):
    """A type's name, string, binary and list types of every width one."""
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return "list<" + kind(t.value_type) + ">"
    if pa.types.is_struct(t):
        return "struct<" + ",".join(f.name + ":" + kind(f.type) for f in t) + ">"
    if pa.types.is_dictionary(t):
        return kind(t.value_type)
    return str(t)


def summary(t):
    rows = sorted(json.dumps(plain(r), sort_keys=True) for r in t.to_pylist())
    return {"columns": t.column_names, "types": [kind(f.type) for f in t.schema], "rows": rows}


def tables(run_dir, query_dir, names):
    import os

    import pyarrow as pa
    import pyarrow.dataset as ds

    out = {}
    for name in names:
        d = os.path.join(run_dir, name)
        out[name] = {
            "pyarrow": summary(ds.dataset(d, format="parquet", partitioning="hive").to_table()),
            "polars": summary(polars.read_parquet(d + "/**/*.parquet", hive_partitioning=True).to_arrow()),
            "duckdb": summary(duckdb.sql(f"select * from read_parquet('{d}/**/*.parquet', hive_partitioning=true)").arrow().read_all()),
        }
        with open(os.path.join(query_dir, name + ".arrow"), "rb") as f:
            out[name]["t1"] = summary(pa.ipc.open_stream(f).read_all())
    return out


def main():
    if sys.argv[1:2] == ["--tables"]:
        json.dump(tables(sys.argv[2], sys.argv[3], sys.argv[4:]), sys.stdout)
        return
    json.dump({p: read(p) for p in sys.argv[1:]}, sys.stdout)


if __name__ == "__main__":
    main()
