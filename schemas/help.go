package schemas

// InspectHelp is what `t1 inspect` says of itself.
const InspectHelp = `Inspects a local Parquet file, or, when no such file exists, an object key in the
configured store (e.g. runs/r1/tokens/iter=0001/part-….parquet, as printed by events).`
