package schemas

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// wallClock lists, by table, the columns that measure elapsed time on the
// machine that did the work, which no seed fixes:
//   - trajectories.duration_ms: how long the attempt took, sandbox start
//     to snapshot;
//   - turns.start_ms: when the turn began, counted from the attempt's
//     start (the sum of the earlier turns' durations);
//   - turns.duration_ms: how long sampling and running the turn's command
//     took.
//
// Every other column is a function of the run's configuration and seed.
var wallClock = map[string][]string{
	TrajectoriesTable.Name: {"duration_ms"},
	TurnsTable.Name:        {"start_ms", "duration_ms"},
}

// WallClock returns the table's wall-clock columns. Object keys and run
// digests leave them out, so that reruns of a seed name and fingerprint
// the same rows alike.
func (t Table) WallClock() []string { return wallClock[t.Name] }

// Canonical encodes rows of one table's files for comparison: every value
// except those of the table's wall-clock columns, with its leaf column's
// path, its repetition and definition levels and its exact bytes, each
// length-prefixed, so that two rows encode alike exactly when they hold
// the same values outside those columns.
type Canonical struct {
	names []string
	skip  []bool
}

// NewCanonical prepares the encoding of rows of table t laid out by s.
func NewCanonical(t Table, s *parquet.Schema) Canonical {
	paths := s.Columns()
	c := Canonical{names: make([]string, len(paths)), skip: make([]bool, len(paths))}
	for i, p := range paths {
		c.names[i] = strings.Join(p, ".")
		c.skip[i] = slices.Contains(t.WallClock(), c.names[i])
	}
	return c
}

// Column returns the leaf index of the column called name, or -1.
func (c Canonical) Column(name string) int { return slices.Index(c.names, name) }

// Append appends the encoding of row to b.
func (c Canonical) Append(b []byte, row parquet.Row) []byte {
	for _, v := range row {
		col := v.Column()
		if c.skip[col] {
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(c.names[col])))
		b = append(b, c.names[col]...)
		b = append(b, byte(v.RepetitionLevel()), byte(v.DefinitionLevel()))
		if v.IsNull() {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		val := v.Bytes()
		b = binary.AppendUvarint(b, uint64(len(val)))
		b = append(b, val...)
	}
	return b
}
