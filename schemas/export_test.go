package schemas

// SampleRows are n rows of T with every column filled from seed, for the
// tests outside the package.
func SampleRows[T Row](seed uint64, n int) []T { return sampleRowsOf[T](seed, n, []int{0, 1, 3}) }
