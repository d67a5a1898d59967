// Package deps keeps the columnar libraries in go.mod before any package
// imports them: parquet-go writes the pipeline's Parquet tables and arrow-go
// reads them (see README, Dependencies). It has no code.
package deps

import (
	_ "github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/parquet-go/parquet-go"
)
