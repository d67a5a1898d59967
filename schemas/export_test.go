package schemas

// SampleRows are n rows of T with every column filled from seed, for the
// tests outside the package.
func SampleRows[T Row](seed uint64, n int) []T { return sampleRowsOf[T](seed, n, []int{0, 1, 3}) }

// RoundTripRows are the rows of the round-trip tests: list lengths cycle
// through 0, 1, 3, a very long one, 0 and 2.
func RoundTripRows[T Row](seed uint64, n int) []T { return sampleRows[T](seed, n) }

// Normalize and ColumnName compare a row's values with a reader's.
var (
	Normalize  = normalize
	ColumnName = columnName
)

// BenchTokens are BenchmarkTokensTable's rows.
var BenchTokens = benchTokens
