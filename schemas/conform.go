package schemas

import (
	"bytes"
	"fmt"

	"github.com/parquet-go/parquet-go"
)

// emptyFiles writes a file of each table's rows with none in it, whose
// schema is the table's at this build's version.
var emptyFiles = map[string]func() ([]byte, error){
	TasksTable.Name:        emptyFile[TaskRow],
	AuditsTable.Name:       emptyFile[AuditRow],
	TrajectoriesTable.Name: emptyFile[TrajectoryRow],
	TurnsTable.Name:        emptyFile[TurnRow],
	TokensTable.Name:       emptyFile[TokenRow],
	RoutingTable.Name:      emptyFile[RoutingRow],
	RewardsTable.Name:      emptyFile[RewardRow],
	ValuesTable.Name:       emptyFile[ValueRow],
	MetricsTable.Name:      emptyFile[MetricRow],
	EvalResultsTable.Name:  emptyFile[EvalResultRow],
}

func emptyFile[T Row]() ([]byte, error) {
	var zero T
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[T](&buf, writerOptions(zero.Table(), WriterOptions{ZstdLevel: DefaultZstdLevel, RowGroupRows: 1})...)
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// EmptyFile is a Parquet file of t with no rows: its schema is t's as this
// build writes it.
func EmptyFile(t Table) ([]byte, error) {
	mk, ok := emptyFiles[t.Name]
	if !ok {
		return nil, fmt.Errorf("schemas: no row type for table %s", t.Name)
	}
	data, err := mk()
	if err != nil {
		return nil, fmt.Errorf("schemas: table %s: %w", t.Name, err)
	}
	return data, nil
}
